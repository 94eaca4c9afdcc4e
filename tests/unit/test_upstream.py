"""Waits on other jobs decided from states alone: ready, waiting or blocked, and the cycles
a submitted batch may not have.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import job_toml

from relay_engine.contracts.job_file import parse_job_text
from relay_engine.core.states import IllegalTransition, JobState, check_job
from relay_engine.core.upstream import Blocked, Ready, Waiting, batch_cycles, job_wait, task_wait


def test_planner_tasks_may_not_name_other_jobs(tmp_path: Path) -> None:
    from relay_engine.contracts.planner import PlanAccepted, validate_planner_output

    raw = {
        "objective_status": "in_progress",
        "next_tasks": [{"id": "t", "title": "t", "input": "i", "dependencies": ["other/x"]}],
    }
    verdict = validate_planner_output(raw, existing_task_ids=[], known_roles={"implementer"})
    assert not isinstance(verdict, PlanAccepted)
    assert "only ids of this job's tasks" in verdict.reason


@pytest.mark.parametrize(
    ("after", "states", "expected"),
    [
        (["a"], {"a": "SUCCEEDED"}, Ready()),
        (["a", "b"], {"a": "MERGED", "b": "ACTIVE"}, Waiting(("b",))),
        (["a"], {"a": "DRAFT"}, Waiting(("a",))),
        (["a", "b"], {"a": "FAILED", "b": "CLOSED"}, Blocked("job a failed, job b closed")),
    ],
)
def test_job_wait(after: list[str], states: dict[str, str], expected: object) -> None:
    assert job_wait(after, states) == expected


@pytest.mark.parametrize(
    ("upstream", "states", "expected"),
    [
        (["a/x"], {"a/x": "SUCCEEDED"}, Ready()),
        (["a/x", "a/y"], {"a/x": "SUCCEEDED", "a/y": "RUNNING"}, Waiting(("a/y",))),
        (["a/x", "a/y"], {"a/x": "QUEUED", "a/y": "CANCELLED"}, Blocked("a/y")),
    ],
)
def test_task_wait(upstream: list[str], states: dict[str, str], expected: object) -> None:
    assert task_wait(upstream, states) == expected


def test_a_cycle_inside_one_job_is_not_a_cross_job_cycle() -> None:
    a = parse_job_text(job_toml("a", [{"id": "x", "input": "x"}]), Path("a.toml"))
    b = parse_job_text(
        job_toml("b", [{"id": "y", "input": "y", "depends_on": ["a/x"]}], after=["a"]),
        Path("b.toml"),
    )
    assert batch_cycles([a, b]) == []


def test_a_draft_job_only_starts_or_is_cancelled() -> None:
    assert check_job(JobState.DRAFT, JobState.ACTIVE) is JobState.ACTIVE
    assert check_job(JobState.DRAFT, JobState.CANCELLED) is JobState.CANCELLED
    for target in (JobState.SUCCEEDED, JobState.FAILED, JobState.MERGED, JobState.CLOSED):
        with pytest.raises(IllegalTransition):
            check_job(JobState.DRAFT, target)
