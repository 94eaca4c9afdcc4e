"""Scheduled jobs on a running engine with a clock the test moves: each slot one run,
never two for one slot across engines, and missed slots reported on a restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers import (
    Workspace,
    events,
    job_toml,
    jobs,
    run_until_idle,
    running_engine,
    sim,
    wait_for,
)
from sqlmodel import select

from relay_engine.contracts.job_file import load_job_file
from relay_engine.contracts.schedules import ScheduleRule
from relay_engine.core.schedules import Slot, slots_after
from relay_engine.loop.engine import Engine
from relay_engine.ops.jobs import submit_job
from relay_engine.ops.schedules import read_schedules, start_due_runs
from relay_engine.store.schema import Schedule

HOURLY = "0 * * * *"


class Clock:
    """The engine's clock: real time moved to wherever the test puts it."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift

    def at(self, moment: float) -> None:
        self.shift = moment - time.time()


def template(ws: Workspace, catch_up: str = "last") -> list[Slot]:
    """An hourly template submitted now; its next four slots."""
    text = job_toml(
        "hourly", [{"id": "t", "input": "x", "sim": sim()}], schedule=HOURLY, catch_up=catch_up
    )
    spec = load_job_file(ws.write_job(text, "hourly.toml"))
    now = time.time()
    assert submit_job(ws.store(), spec, now=now).created
    return slots_after(ScheduleRule(HOURLY, "UTC", catch_up), now, now + 5 * 3600, 4)  # type: ignore[arg-type]


def run_ids(ws: Workspace) -> list[str]:
    return sorted(job for job in jobs(ws.store()) if job.startswith("hourly@"))


def test_three_slots_start_three_runs_that_each_run_their_tasks(workspace: Workspace) -> None:
    slots = template(workspace)[:3]
    clock = Clock()
    for slot in slots:
        clock.at(slot.at + 5)
        assert run_until_idle(Engine(workspace.path, store=workspace.store(), clock=clock))
    assert run_ids(workspace) == [f"hourly@{slot.label}" for slot in slots]
    assert all(jobs(workspace.store())[job].state == "SUCCEEDED" for job in run_ids(workspace))
    assert len(events(workspace.store(), "schedule.run")) == 3
    assert not events(workspace.store(), "schedule.missed")
    with workspace.store().read() as session:
        (view,) = read_schedules(session, clock())
    assert view.last_run == f"hourly@{slots[2].label}" and view.last_run_state == "SUCCEEDED"
    assert view.next_run == f"hourly@{template_next(slots[2])}"


def template_next(slot: Slot) -> str:
    return slots_after(ScheduleRule(HOURLY), slot.at, slot.at + 7200, 1)[0].label


@pytest.mark.parametrize("catch_up", ["last", "none"])
def test_a_restart_after_missed_slots_follows_catch_up(workspace: Workspace, catch_up: str) -> None:
    slots = template(workspace, catch_up)
    clock = Clock()
    clock.at(slots[0].at + 5)
    assert run_until_idle(Engine(workspace.path, store=workspace.store(), clock=clock))
    clock.at(slots[3].at + 1200)  # no engine ran through slots 1, 2 and 3
    assert run_until_idle(Engine(workspace.path, store=workspace.store(), clock=clock))
    (missed,) = events(workspace.store(), "schedule.missed")
    if catch_up == "last":
        assert run_ids(workspace) == [f"hourly@{slots[0].label}", f"hourly@{slots[3].label}"]
        assert f"missed 2 slot(s) while no engine ran ({slots[1].label} .. {slots[2].label})" in (
            missed.message
        )
        assert f"runs hourly@{slots[3].label}" in missed.message
    else:
        assert run_ids(workspace) == [f"hourly@{slots[0].label}"]
        assert "missed 3 slot(s)" in missed.message and "runs none of them" in missed.message
    with workspace.store().read() as session:
        row = session.get(Schedule, "hourly")
    assert row is not None and row.missed_count == (2 if catch_up == "last" else 3)
    assert row.cursor_at == slots[3].at
    listed = workspace.cli("schedules", "--json")
    assert listed.returncode == 0, listed.stderr
    assert f'"missed": {row.missed_count}' in listed.stdout


@pytest.mark.postgres
def test_a_paused_schedule_starts_nothing_and_resumes_from_its_next_slot(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace
    slots = template(ws)
    clock = Clock()
    paused = ws.cli("schedules", "pause", "hourly")
    assert paused.returncode == 0, paused.stderr
    assert "scheduled job hourly paused" in paused.stdout
    assert "paused since" in ws.cli("schedules").stdout
    clock.at(slots[1].at + 5)  # two slots pass while it is paused
    run_until_idle(Engine(ws.path, store=ws.store(), clock=clock))
    assert run_ids(ws) == [] and events(ws.store(), "schedule.missed") == []
    with ws.store().write() as session:  # resumed at the clock's time, as an operator would
        row = session.get(Schedule, "hourly")
        assert row is not None
        row.cursor_at = clock()
        session.add(row)
    resumed = ws.cli("schedules", "resume", "hourly")
    assert resumed.returncode == 0, resumed.stderr
    assert f"next run hourly@{slots[2].label}" in resumed.stdout
    clock.at(slots[2].at + 5)
    assert run_until_idle(Engine(ws.path, store=ws.store(), clock=clock))
    assert run_ids(ws) == [f"hourly@{slots[2].label}"]  # the paused slots are not made up


def test_removing_a_schedule_keeps_its_runs_and_frees_its_id(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    slots = template(ws)
    clock = Clock()
    clock.at(slots[0].at + 5)
    assert run_until_idle(Engine(ws.path, store=ws.store(), clock=clock))
    unknown = ws.cli("schedules", "pause", "nightly")
    assert unknown.returncode == 2
    assert "no scheduled job 'nightly' (scheduled jobs: hourly)" in unknown.stderr
    removed = ws.cli("schedules", "remove", "hourly")
    assert removed.returncode == 0, removed.stderr
    assert "the runs it made stay" in removed.stdout
    assert "no scheduled jobs" in ws.cli("schedules").stdout
    assert run_ids(ws) == [f"hourly@{slots[0].label}"]
    daily = job_toml("hourly", [{"id": "t", "input": "y", "sim": sim()}], schedule="0 3 * * *")
    again = ws.cli("submit", str(ws.write_job(daily, "hourly.toml")))
    assert again.returncode == 0, again.stderr  # a changed definition, under the same id
    assert "0 3 * * *" in ws.cli("schedules").stdout


def test_two_engines_on_postgres_start_one_run_per_slot(pg_url: str, tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", pg_url)
    ws.path.mkdir()
    ws.configure()
    try:
        slots = template(ws)[:3]
        clock = Clock()
        first, second = (Engine(ws.path, store=ws.store(), clock=clock) for _ in range(2))
        with running_engine(first), running_engine(second):
            for count, slot in enumerate(slots, start=1):
                clock.at(slot.at + 5)
                wait_for(lambda n=count: len(run_ids(ws)) >= n, what=f"run {count}")  # type: ignore[misc]
            time.sleep(0.5)  # both engines tick past the last slot more than once
        assert run_ids(ws) == [f"hourly@{slot.label}" for slot in slots]
        assert len(events(ws.store(), "schedule.run")) == 3
    finally:
        ws.close()


@pytest.mark.postgres
def test_engines_racing_for_one_slot_start_it_once(pg_url: str, tmp_path: Path) -> None:
    """Eight stores decide the same due slot at the same instant: the cursor's
    compare-and-swap lets exactly one make the run."""
    ws = Workspace(tmp_path / "ws", pg_url)
    ws.path.mkdir()
    ws.configure()
    try:
        slot = template(ws)[0]
        stores = [ws.store() for _ in range(8)]
        start = threading.Barrier(len(stores))
        won: list[bool] = []

        def decide(index: int) -> None:
            start.wait()
            won.append(start_due_runs(stores[index], slot.at + 5))

        threads = [threading.Thread(target=decide, args=(i,)) for i in range(len(stores))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(won) == [False] * 7 + [True]
        assert run_ids(ws) == [f"hourly@{slot.label}"]
        with ws.store().read() as session:
            assert len(session.exec(select(Schedule)).all()) == 1
    finally:
        ws.close()
