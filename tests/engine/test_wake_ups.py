"""Wake-ups across processes: what another process writes, a running engine acts on at once.

Each engine here ticks once a minute, so anything it does within seconds of a ``relay``
command in another process it did because that command woke it (SQLite: a watched file
beside the database; PostgreSQL: LISTEN/NOTIFY).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import (
    Workspace,
    executions,
    job_toml,
    pid_gone,
    psycopg_conninfo,
    running_engine,
    sim,
    task_state,
    wait_for,
)
from sqlalchemy.engine import make_url

from relay_engine.cli.engines import ASLEEP_NOTE, NOT_HEARD_NOTE
from relay_engine.store import wakes
from relay_engine.store.wakes import LISTENER_NAME

SLOW = {"tick": 60.0, "heartbeat": 30.0, "lease": 200.0}
"""A minute between full ticks, half a minute between heartbeats: only a wake-up is quick."""


def lost_probe(connection: Any, probe: str) -> None:
    """What a pooler in transaction mode does to a probe: it never reaches the listener."""
    connection.execute("SELECT pg_notify('nobody_listens', %s)", (probe,))


def test_a_submit_from_the_cli_starts_at_once_on_an_engine_that_ticks_each_minute(
    workspace: Workspace,
) -> None:
    workspace.configure(**SLOW)
    engine = workspace.engine()
    store = workspace.store()
    with running_engine(engine):
        wait_for(lambda: engine.hears_wake_ups, timeout=15, what="the engine to listen")
        workspace.submit(job_toml("woken", [{"id": "a", "sim": sim(0.05)}]))
        wait_for(lambda: task_state(store, "woken/a") == "SUCCEEDED", timeout=20, what="a run")


def test_a_cancel_from_the_cli_stops_the_agent_at_once(workspace: Workspace) -> None:
    """``relay cancel`` applies the cancel itself; the engine that runs the agent hears of it
    and stops it now, not at its next fence check a tick later."""
    workspace.configure(**SLOW)
    engine = workspace.engine()
    store = workspace.store()
    workspace.submit(job_toml("long", [{"id": "t", "sim": sim(300)}]))
    with running_engine(engine):
        wait_for(lambda: engine.hears_wake_ups, timeout=15, what="the engine to listen")
        engine.wake()  # the submit came before it listened: its first tick may still wait
        wait_for(lambda: task_state(store, "long/t") == "RUNNING", timeout=70, what="a start")
        (run,) = wait_for(lambda: [e for e in executions(store) if e.pid], what="its pid")
        assert workspace.cli("cancel", "long/t").returncode == 0
        wait_for(lambda: pid_gone(run.pid), timeout=20, what="the agent to stop")
        assert task_state(store, "long/t") == "CANCELLED"


def test_an_engine_whose_fleet_has_no_work_ticks_only_at_heartbeats(
    workspace: Workspace,
) -> None:
    """Left running for the next submit, an engine that hears wake-ups does not read the
    database every tick for nothing; one that does not (``wake_ups = false``) must."""
    workspace.configure(tick=0.05, heartbeat=1.0, lease=30.0)
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: engine.hears_wake_ups and len(engine.ticks) > 3, what="a quiet engine")
        before = len(engine.ticks)
        time.sleep(2.0)
        quiet = len(engine.ticks) - before
        wait_for(lambda: _wake_ups_said(workspace) == ["heard"], timeout=10, what="'heard'")
        workspace.submit(job_toml("after", [{"id": "a", "sim": sim(0.05)}]))
        wait_for(lambda: task_state(workspace.store(), "after/a") == "SUCCEEDED", timeout=10)
    assert quiet <= 4, quiet  # forty at the tick interval

    workspace.configure(tick=0.05, heartbeat=1.0, lease=30.0, wake_ups=False)
    deaf = workspace.engine()
    with running_engine(deaf):
        wait_for(lambda: len(deaf.ticks) > 3, what="ticks")
        before = len(deaf.ticks)
        time.sleep(1.0)
        assert not deaf.hears_wake_ups
        assert len(deaf.ticks) - before >= 10
        wait_for(lambda: "off" in _wake_ups_said(workspace), timeout=10, what="'off'")


def test_relay_engines_says_an_engine_is_asleep_until_work_wakes_it(
    workspace: Workspace,
) -> None:
    """An engine with nothing to do ticks only at its heartbeats: ``relay engines`` says it
    sleeps (``--json``: since when), and no longer once a submit woke it and its agent
    runs."""
    workspace.configure(tick=0.05, heartbeat=1.0, lease=30.0)
    engine = workspace.engine()
    store = workspace.store()
    with running_engine(engine):
        wait_for(lambda: engine._asleep_since is not None, timeout=15, what="it to sleep")
        assert _said_in_table(workspace, ASLEEP_NOTE.split()[0])  # the cell wraps at 80
        (since,) = _asleep_said(workspace)
        assert since is not None and abs(time.time() - since) < 15
        workspace.submit(job_toml("woke", [{"id": "a", "sim": sim(300)}]))
        wait_for(lambda: task_state(store, "woke/a") == "RUNNING", timeout=15, what="a start")
        wait_for(lambda: _asleep_said(workspace) == [None], timeout=10, what="awake")


def _asleep_said(workspace: Workspace) -> list[float | None]:
    """What ``relay engines --json`` says of each live engine's sleep."""
    return _live_engines_say(workspace, "asleep_since")


@pytest.mark.postgres
def test_a_listener_whose_connection_is_cut_listens_again(tmp_path: Path, pg_url: str) -> None:
    """The server ends the engine's LISTEN connection (a restart, an idle-connection
    reaper): the engine connects again, and what is submitted after still wakes it."""
    workspace = Workspace(tmp_path / "ws", pg_url)
    workspace.path.mkdir()
    workspace.configure(**SLOW)
    engine = workspace.engine()
    store = workspace.store()
    with running_engine(engine), psycopg.connect(psycopg_conninfo(pg_url, "postgres")) as admin:
        wait_for(lambda: engine.hears_wake_ups, timeout=15, what="the engine to listen")
        database = make_url(pg_url).database
        (first,) = wait_for(lambda: _listeners(admin, database), what="its LISTEN connection")
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
        again = wait_for(lambda: [p for p in _listeners(admin, database) if p != first], 20)
        assert len(again) == 1
        wait_for(lambda: engine.hears_wake_ups, timeout=5, what="the engine to listen again")
        workspace.submit(job_toml("later", [{"id": "a", "sim": sim(0.05)}]))
        wait_for(lambda: task_state(store, "later/a") == "SUCCEEDED", timeout=20, what="a run")


def _listeners(admin: psycopg.Connection[Any], database: str | None) -> list[int]:
    query = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s"
    rows = admin.execute(query, (database, LISTENER_NAME)).fetchall()
    admin.commit()
    return [pid for (pid,) in rows]


def test_a_wake_up_that_lands_while_the_engine_looks_keeps_it_awake(
    sqlite_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look read the fleet before a submit committed, and the submit's wake-up came
    before the look ended: the engine must not take the stale "no work" for the last word
    and sleep to its heartbeat with the new job waiting."""
    workspace = sqlite_workspace
    workspace.configure(**SLOW)
    engine = workspace.engine()
    engine.tick()
    assert engine.did_chores and engine._quiet  # nothing anywhere: it may sleep

    looked = engine._fleet_has_work

    def woken_while_looking() -> bool:
        found = looked()
        workspace.submit(job_toml("late", [{"id": "a", "sim": sim(0.05)}]))
        engine._look_now()  # what its listener does when the submit's wake-up arrives
        return found

    monkeypatch.setattr(engine, "_fleet_has_work", woken_while_looking)
    engine.tick()
    assert engine.did_chores and not engine._quiet
    engine.shutdown(release=True)


@pytest.mark.postgres
def test_an_engine_whose_wake_ups_do_not_come_back_keeps_its_tick_interval(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind a pooler in transaction mode LISTEN is accepted and nothing sent after it
    arrives. The engine's probe never comes back: it says so, does not count on wake-ups,
    and keeps ticking at its interval, so a submit still starts a tick later."""

    monkeypatch.setattr(wakes, "send_probe", lost_probe)
    monkeypatch.setattr(wakes, "PROBE_S", 1.0)
    workspace = Workspace(tmp_path / "ws", pg_url)
    workspace.path.mkdir()
    workspace.configure(tick=0.05, heartbeat=1.0, lease=30.0)
    engine = workspace.engine()
    with running_engine(engine):
        wait_for(lambda: "do not come back" in caplog.text, timeout=15, what="the warning")
        before = len(engine.ticks)
        time.sleep(1.0)
        assert not engine.hears_wake_ups
        assert len(engine.ticks) - before >= 10
        engines = wait_for(lambda: _said_in_table(workspace, NOT_HEARD_NOTE), timeout=10)
        assert engine.id in engines


def _wake_ups_said(workspace: Workspace) -> list[str | None]:
    """What ``relay engines --json`` says of each live engine's wake-ups."""
    return _live_engines_say(workspace, "wake_ups")


def _live_engines_say(workspace: Workspace, field: str) -> list[Any]:
    result = workspace.cli("engines", "--json")
    assert result.returncode == 0, result.stderr
    return [row[field] for row in json.loads(result.stdout) if row["state"] == "live"]


def _said_in_table(workspace: Workspace, words: str) -> str | None:
    result = workspace.cli("engines")
    assert result.returncode == 0, result.stderr
    return result.stdout if words in " ".join(result.stdout.split()) else None


@pytest.mark.postgres
def test_relay_doctor_says_whether_wake_ups_come_back(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asked before any engine runs: a probe sent and listened for, as an engine does, so a
    pooler in transaction mode is caught by `relay doctor` rather than in an engine's log."""
    workspace = Workspace(tmp_path / "ws", pg_url)
    workspace.path.mkdir()
    workspace.configure()
    done = workspace.cli("doctor", "--json")
    assert json.loads(done.stdout)["wake_ups"]["heard"] is True, done.stdout
    assert "wake-ups: heard" in workspace.cli("doctor").stdout

    monkeypatch.setattr(wakes, "send_probe", lost_probe)
    from relay_engine.cli.main import main

    assert main(["--workspace", str(workspace.path), "--db", pg_url, "doctor"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "warning: wake-ups: a probe sent on postgresql://" in said
    assert "set [engine] wake_ups = false" in said
