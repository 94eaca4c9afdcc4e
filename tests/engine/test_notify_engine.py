"""Notifications that leave the machine: a real HTTP server on 127.0.0.1 and a real command."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import Workspace, events, job_toml, run_until_idle, sim

from relay_engine.loop import notify

KINDS = ["task.succeeded", "task.failed", "job.finished", "job.blocked"]


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notify, "RETRY_DELAYS_S", (0.01, 0.02))


class Inbox:
    """What a webhook receiver got, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.lock = threading.Lock()

    def kinds(self) -> Counter[str]:
        with self.lock:
            return Counter(body["kind"] for body in self.bodies)

    def ids(self) -> list[int]:
        with self.lock:
            return [body["id"] for body in self.bodies]


@contextmanager
def webhook_server(port: int = 0) -> Iterator[tuple[str, Inbox]]:
    inbox = Inbox()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            with inbox.lock:
                inbox.bodies.append(body)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook/secret-token", inbox
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def two_task_job(job_id: str = "notified") -> str:
    return job_toml(
        job_id,
        [
            {"id": "good", "input": "works", "sim": sim()},
            {"id": "bad", "input": "breaks", "max_attempts": 1, "sim": sim(exit_code=3)},
        ],
        troubleshoot=False,
    )


def notified_events(ws: Workspace) -> list[int]:
    return [e.id for e in events(ws.store(), *KINDS) if e.id is not None]


def test_webhook_receives_each_chosen_event_once(workspace: Workspace) -> None:
    with webhook_server() as (url, inbox):
        workspace.configure(notifications={"webhook": url, "on": KINDS})
        workspace.submit(two_task_job())
        run_until_idle(workspace.engine())
        assert inbox.kinds() == Counter({"task.succeeded": 1, "task.failed": 1, "job.blocked": 1})
        assert sorted(inbox.ids()) == notified_events(workspace)
        failed = next(b for b in inbox.bodies if b["kind"] == "task.failed")
        assert failed["task"] == "notified/bad"
        assert failed["job"] == "notified"
        assert "exit 3" in failed["message"]


@pytest.mark.slow
def test_two_engines_on_one_database_post_each_event_once(workspace: Workspace) -> None:
    with webhook_server() as (url, inbox):
        workspace.configure(notifications={"webhook": url, "on": ["task.*", "job.finished"]})
        tasks = [{"id": f"t{i}", "input": "x", "sim": sim(0.1)} for i in range(6)]
        workspace.submit(job_toml("pair", tasks))
        first, second = workspace.engine(), workspace.engine()
        threads = [
            threading.Thread(target=e.run, kwargs={"until_idle": True}) for e in (first, second)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        ids = inbox.ids()
        assert len(ids) == len(set(ids)), "an event was posted twice"
        assert inbox.kinds()["task.succeeded"] == 6


def test_a_dead_webhook_is_an_event_and_the_engine_carries_on(workspace: Workspace) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook/secret-token"
    workspace.configure(notifications={"webhook": url, "on": KINDS})
    workspace.submit(two_task_job("first"))
    assert run_until_idle(workspace.engine()) is False  # "bad" failed, as scripted
    failures = events(workspace.store(), "notify.failed")
    assert len(failures) == 3
    assert all("127.0.0.1" in e.message and "secret-token" not in e.message for e in failures)
    with webhook_server(port) as (_, inbox):
        workspace.submit(job_toml("second", [{"id": "ok", "input": "x", "sim": sim()}]), "b.toml")
        run_until_idle(workspace.engine())
        assert inbox.kinds() == Counter({"task.succeeded": 1, "job.finished": 1})
        assert {b["job"] for b in inbox.bodies} == {"second"}


def test_command_notifier_reads_each_event_on_stdin(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    received = ws.path / "received.jsonl"
    script = (
        "import sys; data = sys.stdin.read(); "
        f"open({str(received)!r}, 'a').write(data.strip() + '\\n')"
    )
    ws.configure(notifications={"command": [sys.executable, "-c", script], "on": KINDS})
    ws.submit(two_task_job())
    run_until_idle(ws.engine())
    bodies = [json.loads(line) for line in received.read_text().splitlines()]
    assert Counter(b["kind"] for b in bodies) == Counter(
        {"task.succeeded": 1, "task.failed": 1, "job.blocked": 1}
    )


@pytest.mark.slow
def test_a_failing_command_is_reported_with_its_stderr(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    script = "import sys; sys.stderr.write('ntfy: topic missing\\n'); sys.exit(4)"
    ws.configure(notifications={"command": [sys.executable, "-c", script], "on": ["job.finished"]})
    ws.submit(job_toml("solo", [{"id": "ok", "input": "x", "sim": sim()}]))
    assert run_until_idle(ws.engine()) is True
    (failure,) = events(ws.store(), "notify.failed")
    assert "exit 4: ntfy: topic missing" in failure.message
