"""A `command` agent that tries to leave its worktree (driven by tests/test_sandbox.py).

Its plan comes in PROBE_PLAN (JSON). The task ``sibling`` leaves a file in its own worktree
and waits; the task ``probe`` waits for it, says it is ready, waits for the test's "go",
tries every write (and a connection, and a listing) outside its worktree, prints one line
``PROBE {json}`` with what happened, says it is done, and waits to be released -- so the
test hashes the files it attacks while no agent and no task completion is writing.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            sys.exit(f"probe: {path} never appeared")
        time.sleep(0.02)


def attempt(action: Callable[[], object]) -> dict[str, object]:
    try:
        action()
    except OSError as error:
        return {"ok": False, "error": errno.errorcode.get(error.errno or 0, str(error))}
    return {"ok": True}


def append(path: Path, text: str) -> Callable[[], object]:
    def write() -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)

    return write


def connect(port: int) -> Callable[[], object]:
    def dial() -> None:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()

    return dial


def write_result() -> None:
    Path(os.environ["RELAY_RESULT_FILE"]).write_text('{"summary": "probed"}')


def probe(plan: dict[str, str], token: str) -> dict[str, dict[str, object]]:
    home, here = Path(plan["home"]), Path.cwd()
    artifacts = Path(os.environ["RELAY_PROMPT_FILE"]).parent
    return {
        "worktree": attempt(append(here / "mine.txt", token)),
        "result": attempt(write_result),
        "record": attempt(append(artifacts / "process.json", token)),
        "artifacts": attempt(append(artifacts / f"x-{token}", token)),  # a planted file
        "database": attempt(append(Path(plan["database"]), token)),
        "sibling": attempt(append(Path(plan["sibling"]) / "sibling.txt", token)),
        "checkout": attempt(append(Path(plan["checkout"]) / "README.md", token)),
        "home": attempt(append(home / f"x-{token}", token)),
        "etc": attempt(append(Path(f"/etc/relay-sandbox-{token}"), token)),
        "parent": attempt(append(here.parent / f"x-{token}", token)),
        "network": attempt(connect(int(plan["port"]))),
        "ssh": attempt(lambda: os.listdir(home / ".ssh")),
        "shared-read": attempt((home / ".aws" / "config").read_text),
        "shared-write": attempt(append(home / ".aws" / "config", token)),
        "drop": attempt(append(Path(plan["drop"]) / f"x-{token}", token)),
    }


def main() -> None:
    plan = json.loads(os.environ["PROBE_PLAN"])
    task = os.environ["RELAY_TASK"].rpartition("/")[2]
    here = Path.cwd()
    if task == "sibling":
        (here / "sibling.txt").write_text("the sibling's own work\n")
        (here / "ready").write_text("")
        wait_for(Path(plan["release"]))
        return
    wait_for(Path(plan["sibling"]) / "ready")
    (here / "ready").write_text("")
    wait_for(Path(plan["go"]))
    report = {**probe(plan, plan["token"]), "env": {"ok": True, "names": sorted(os.environ)}}
    print("PROBE " + json.dumps(report), flush=True)
    (here / "done").write_text("")
    wait_for(Path(plan["release"]))


if __name__ == "__main__":
    main()
