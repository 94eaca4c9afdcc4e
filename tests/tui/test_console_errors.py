"""What the operator sees when something goes wrong: refusals, rejections, crashes, typos."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from console_helpers import (
    attached_app,
    cursor_to,
    finish_then_apply,
    run_async,
    wait_loaded,
    wait_until,
)
from helpers import Workspace

from relay_engine.store.db import Store
from relay_engine.store.events import record_event
from relay_tui import cli
from relay_tui.app import RelayApp
from relay_tui.demo.sample import NOW, write_sample
from relay_tui.screens.budget import BudgetScreen


def toasts(app: RelayApp) -> list[tuple[str, str]]:
    return [(n.severity, n.message) for n in app._notifications]


def header(app: RelayApp) -> str:
    return str(app.main_screen.query_one("#header").render())


@run_async
async def test_a_refused_command_is_an_error_toast_with_the_full_reason(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        assert "engine: none running" in header(app) and "0 commands waiting" in header(app)
        await cursor_to(pilot, "search/fixtures")
        await pilot.press("r")
        await wait_until(pilot, lambda: "1 command waiting" in header(app))
        assert (
            "warning",
            "retry search/fixtures is waiting: no engine is running to apply it.",
        ) in toasts(app)
        finish_then_apply(url, "search/fixtures")
        reason = "retry refused: task search/fixtures is SUCCEEDED; only FAILED or CANCELLED retry"
        await wait_until(pilot, lambda: ("error", reason) in toasts(app))
        await wait_until(pilot, lambda: "0 commands waiting" in header(app))
        assert "1 command waiting" not in header(app)


@run_async
async def test_planner_rejections_are_error_toasts(tmp_path: Path) -> None:
    url = write_sample(tmp_path)
    app = attached_app(tmp_path, url)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_loaded(pilot)
        store = Store(url)
        reason = "job billing round 3 attempt 1: objective_status: required field missing"
        with store.write() as session:
            record_event(
                session, "plan.rejected", reason, now=NOW, job_id="billing", level="warning"
            )
        store.dispose()
        app.feed.nudge()
        await wait_until(pilot, lambda: ("error", reason) in toasts(app))


def test_db_pointing_at_a_missing_sqlite_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "x.db"
    assert cli.main(["--db", f"sqlite:///{missing}"]) == 2
    error = capsys.readouterr().err
    assert f"no database file at {missing}" in error and "--create" in error
    assert not missing.parent.exists()  # nothing was created on the way
    assert cli.missing_sqlite_file(f"sqlite:///{missing}") == missing
    assert cli.missing_sqlite_file("postgresql://u@h/db") is None


class CrashingApp(RelayApp):
    def action_help(self) -> None:
        raise RuntimeError("boom in the console")


def test_a_crash_writes_its_traceback_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = write_sample(tmp_path)

    original = CrashingApp.on_ready

    def on_ready(self: CrashingApp) -> None:
        original(self)
        self.call_later(self.action_help)

    monkeypatch.setattr(CrashingApp, "on_ready", on_ready)
    code = cli.run(tmp_path, url, False, app_class=CrashingApp, headless=True)
    assert code == 1
    error = capsys.readouterr().err
    assert "relay-tui crashed: RuntimeError: boom in the console" in error
    report = Path(error.split("The traceback is in ")[1].split("\n")[0])
    assert report.parent == tmp_path / ".relay" / "logs"
    assert "boom in the console" in report.read_text() and "action_help" in report.read_text()


@run_async
async def test_a_read_only_workspace_is_watched_and_commands_say_why_they_cannot_go(
    read_only_workspace: Workspace,
) -> None:
    """No embedded engine on a database we may not write (it would fail on its first
    write): the console watches, says so in its header, and a command names the reason."""
    app = RelayApp(read_only_workspace.path, blink=False)
    assert app.engine is None and app.attached
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot)
        assert "read-only · relay.db" in header(app)
        await cursor_to(pilot, "job:j")
        await pilot.press("b")  # raise its budget: a command like any other
        await wait_until(pilot, lambda: any("is read-only here" in m for _, m in toasts(app)))
        assert not isinstance(app.screen, BudgetScreen)  # refused before any dialog
        app.clear_notifications()
        await pilot.press("f")  # j succeeded: its tasks are folded away until f
        await cursor_to(pilot, "j/t")
        await pilot.press("c")  # issue 21.17: no "a running agent is stopped", then a refusal
        await wait_until(pilot, lambda: any("is read-only here" in m for _, m in toasts(app)))
        assert app.screen is app.main_screen
    assert app.return_code in (None, 0)


def _both(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """``relay-tui ARGS`` and ``relay ARGS status``: exit status and stderr of each."""
    bin_dir = Path(sys.executable).parent
    runs = []
    for command in ([str(bin_dir / "relay-tui"), *args], [str(bin_dir / "relay"), *args, "status"]):
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        runs.append((done.returncode, done.stderr.strip()))
    return runs


@pytest.mark.parametrize(
    "db",
    ["notes.txt", "{tmp}/notes.txt", "{tmp}/empty.db", "{tmp}/corrupt.db",
     "sqlite:///{tmp}/notes.txt", "sqlite:///{tmp}/corrupt.db"],
)  # fmt: skip
def test_a_database_relay_cannot_use_is_one_line_and_exit_2_as_in_relay(
    tmp_path: Path, db: str
) -> None:
    """Issue 21.2: relay-tui printed a 23-126 line traceback and exited 1 where
    ``relay --db … status`` prints one line and exits 2."""
    (tmp_path / "notes.txt").write_text("not a database\n", encoding="utf-8")
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "corrupt.db").write_bytes(b"SQLite format 3\0" + bytes(range(256)) * 16)
    tui, relay = _both(["--db", db.format(tmp=tmp_path)], tmp_path)
    assert tui == relay
    code, error = tui
    assert code == 2 and error.startswith("error: ") and "\n" not in error, error


def test_postgresql_without_its_driver_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A machine without psycopg: a package of that name that cannot be imported stands in."""
    shadow = tmp_path / "nodriver" / "psycopg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no psycopg here")\n')
    env = {"PYTHONPATH": str(shadow.parent)}
    tui, relay = _both(["--db", "postgresql://u@localhost/x"], tmp_path, env)
    assert tui == relay == (2, "error: PostgreSQL needs its driver: pip install 'relay[postgres]'")
