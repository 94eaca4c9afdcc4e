"""A planner's blockers: their shape in the planner's answer, and the waits they become."""

from __future__ import annotations

from relay_engine.contracts.planner import PlanAccepted, PlanRejected, validate_planner_output
from relay_engine.core.upstream import Blocked, Ready, Waiting, blocker_of, task_wait, wait_path


def answer(*blockers: dict[str, str]) -> dict[str, object]:
    return {
        "objective_status": "in_progress",
        "next_tasks": [{"id": "use", "title": "use it", "input": "x"}],
        "blockers": list(blockers),
    }


def vet(raw: object) -> PlanAccepted | PlanRejected:
    return validate_planner_output(raw, existing_task_ids=(), known_roles=None)


def test_a_blocker_on_a_task_or_a_job_is_part_of_an_accepted_plan() -> None:
    plan = vet(answer({"task": "use", "on": "lib/api"}, {"task": "use", "on": "lib"}))
    assert isinstance(plan, PlanAccepted)
    assert [(b.task, b.on) for b in plan.result.blockers] == [("use", "lib/api"), ("use", "lib")]


def test_a_blocker_must_hold_a_task_of_the_round_and_name_a_job_or_task() -> None:
    plan = vet(answer({"task": "other", "on": "lib/api"}, {"task": "use", "on": "lib/api/x"}))
    assert isinstance(plan, PlanRejected)
    assert "blockers[0].task: 'other' is not in next_tasks" in plan.reason
    assert "blockers[1].on: 'lib/api/x' is not JOB or JOB/TASK" in plan.reason
    loose = vet(answer({"task": "use", "on": "lib", "until": "later"}))  # type: ignore[dict-item]
    assert isinstance(loose, PlanRejected) and "until" in loose.reason


def test_a_wait_on_a_job_ends_when_it_is_done_and_a_dead_job_blocks_it() -> None:
    assert task_wait(["lib"], {"lib": "READY"}) == Waiting(("lib",))
    assert task_wait(["lib", "x/y"], {"lib": "MERGED", "x/y": "SUCCEEDED"}) == Ready()
    assert task_wait(["lib"], {"lib": "SUCCEEDED"}) == Ready()
    assert task_wait(["lib"], {"lib": "CLOSED"}) == Blocked("job lib")
    assert task_wait(["lib"], {"lib": "BLOCKED"}) == Blocked("job lib")
    assert blocker_of("job lib") == "lib" and blocker_of("lib/api") == "lib/api"
    assert blocker_of("build") is None  # a task of the same job


def test_the_path_back_to_the_planning_job_is_the_circle_a_blocker_would_close() -> None:
    graph = {"lib/api": ["lib/prep"], "lib/prep": ["app"], "app": ["app/use"]}
    assert wait_path(lambda n: graph.get(n, []), "lib/api", "app") == ["lib/api", "lib/prep", "app"]
    assert wait_path(lambda n: graph.get(n, []), "lib/prep", "other") is None
