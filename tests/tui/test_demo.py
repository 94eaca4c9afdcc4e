"""The live demo's feeder: what it submits, and that it forgets old jobs (no engine here;
the slow tmux test watches the real demo for five minutes)."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlmodel import select

from relay_engine.store.db import Store
from relay_engine.store.schema import Event, Execution, Job, Task
from relay_tui.demo.feeder import KEPT_FINISHED, DemoFeeder
from relay_tui.demo.workspace import make_demo_workspace


def test_the_feeder_rotates_through_what_a_fleet_meets_and_prunes(tmp_path: Path) -> None:
    workspace = make_demo_workspace(tmp_path / "demo")
    feeder = DemoFeeder(workspace)
    store = Store.for_workspace(workspace)
    try:
        ids = [feeder.feed(store, 1_767_258_000.0 + n) for n in range(12)]
        with store.read() as session:
            tasks = {t.key: t for t in session.exec(select(Task))}
        assert ids[:3] == ["change-1", "change-2", "change-3"]
        assert (
            "change-2/docs" in tasks and tasks["change-2/docs"].pinned_agent == "claude-a"
        )  # a limit
        assert "change-4/flaky" in tasks and "change-6/verify" in tasks  # a failure, an ask
        artifacts = workspace / "artifacts-of-old"
        artifacts.mkdir()
        with store.write() as session:  # they all finished, each with a run that left files
            for job in session.exec(select(Job).where(Job.id.startswith("change-"))):
                job.state = "MERGED"
                session.add(Execution(id=f"ex-{job.id}", job_id=job.id,
                                      artifact_dir=str(artifacts / job.id)))  # fmt: skip
                (artifacts / job.id).mkdir()
        pruned = feeder.prune(store)
        with store.read() as session:
            left = {j.id for j in session.exec(select(Job)) if j.id.startswith("change-")}
            events = session.exec(select(Event.job_id)).all()
        assert left == {f"change-{n}" for n in range(13 - KEPT_FINISHED, 13)}
        assert len(pruned) == 12 - KEPT_FINISHED and not set(pruned) & set(events)
        assert sorted(p.name for p in artifacts.iterdir()) == sorted(left)
    finally:
        store.dispose()
        shutil.rmtree(workspace, ignore_errors=True)
