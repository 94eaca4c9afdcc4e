"""Cancel means cancel: a job cancelled while its planner runs never grows tasks."""

from __future__ import annotations

from helpers import Workspace, executions, jobs, pid_gone, running_engine, tasks, wait_for
from sqlmodel import select
from test_planning_engine import DONE, plan_of, planned_job, work

from relay_engine.store.schema import Execution, Plan


def running_planner(ws: Workspace) -> Execution | None:
    return next((e for e in executions(ws.store()) if e.plan_id and e.pid and not e.ended_at), None)


def test_cancel_job_while_the_planner_runs_materialises_nothing(workspace: Workspace) -> None:
    answer = {"1": plan_of(work("a"), work("b", "a")), "2": DONE}
    workspace.submit(planned_job("doomed", answer, planner_duration=60))
    store = workspace.store()
    with running_engine(workspace.engine()):
        planner = wait_for(lambda: running_planner(workspace), what="the planner to start")
        result = workspace.cli("cancel-job", "doomed")
        assert result.returncode == 0, result.stderr
        wait_for(lambda: pid_gone(planner.pid or 0), timeout=15, what="the planner to be stopped")
        wait_for(
            lambda: next(e for e in executions(store) if e.id == planner.id).ended_at,
            what="the planner's exit to be recorded",
        )
    assert jobs(store)["doomed"].state == "CANCELLED"
    assert tasks(store) == {}
    with store.read() as session:
        (plan,) = session.exec(select(Plan).where(Plan.job_id == "doomed")).all()
    assert (plan.status, plan.error, plan.children_stored) == ("FAILED", "job cancelled", False)
    recorded = next(e for e in executions(store) if e.id == planner.id)
    assert recorded.outcome == "lost"  # a planner round is not a task: the job went
