"""The state machines, written out: every allowed move of a task, plan, job and pull request.

The tables below are typed by hand on purpose, not derived from relay_engine.core.states:
an edit of a transition table (a move added, one dropped, a state added) fails here until
this file says the same, so it is a decision and not an accident. Each machine is checked
both ways: every move listed is allowed by its ``check_*`` function, every other move raises
IllegalTransition.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import pytest

from relay_engine.core.states import (
    JOB_TRANSITIONS,
    PLAN_TRANSITIONS,
    PULL_TRANSITIONS,
    TASK_TRANSITIONS,
    IllegalTransition,
    JobState,
    PlanState,
    PullState,
    TaskState,
    check_job,
    check_plan,
    check_pull,
    check_task,
)

TASK_MOVES = {
    ("DRAFT", "QUEUED"),
    ("DRAFT", "CANCELLED"),
    ("DRAFT", "DROPPED"),  # with a dependency the operator dropped or cancelled
    ("QUEUED", "QUEUED"),  # a claim or a swap: same state, another execution
    ("QUEUED", "RUNNING"),
    ("QUEUED", "PARKED"),
    ("QUEUED", "FAILED"),
    ("QUEUED", "CANCELLED"),
    ("QUEUED", "HELD"),  # the operator took it over
    ("QUEUED", "DROPPED"),
    ("RUNNING", "SUCCEEDED"),
    ("RUNNING", "QUEUED"),
    ("RUNNING", "FAILED"),
    ("RUNNING", "PARKED"),
    ("RUNNING", "CANCELLED"),
    ("RUNNING", "HELD"),
    ("RUNNING", "DROPPED"),
    ("PARKED", "QUEUED"),
    ("PARKED", "CANCELLED"),
    ("PARKED", "HELD"),
    ("PARKED", "DROPPED"),
    ("FAILED", "QUEUED"),  # an operator retry ...
    ("FAILED", "DRAFT"),  # ... or back to DRAFT while dependencies are unfinished
    ("FAILED", "HELD"),
    ("FAILED", "DROPPED"),
    ("CANCELLED", "QUEUED"),
    ("CANCELLED", "DRAFT"),
    ("CANCELLED", "DROPPED"),
    ("HELD", "SUCCEEDED"),  # handed back done: its worktree committed and merged
    ("HELD", "QUEUED"),  # handed back to run on in the same session
    ("HELD", "CANCELLED"),
    ("HELD", "DROPPED"),
    ("DROPPED", "QUEUED"),  # an operator retry takes it up again
    ("DROPPED", "DRAFT"),
}

PLAN_MOVES = {
    ("PLANNING", "PLANNING"),
    ("PLANNING", "SUCCEEDED"),
    ("PLANNING", "FAILED"),
    ("PLANNING", "SUPERSEDED"),
    ("SUCCEEDED", "SUPERSEDED"),
    ("SUCCEEDED", "FAILED"),
    ("FAILED", "PLANNING"),
}

JOB_MOVES = {
    ("DRAFT", "ACTIVE"),
    ("DRAFT", "CANCELLED"),
    ("ACTIVE", "REVIEWING"),
    ("ACTIVE", "SUCCEEDED"),
    ("ACTIVE", "FAILED"),
    ("ACTIVE", "CANCELLED"),
    ("ACTIVE", "MERGED"),
    ("ACTIVE", "CLOSED"),
    ("ACTIVE", "BLOCKED"),  # a task failed for good: the operator decides
    ("REVIEWING", "READY"),
    ("REVIEWING", "ACTIVE"),
    ("REVIEWING", "SUCCEEDED"),
    ("REVIEWING", "FAILED"),
    ("REVIEWING", "CANCELLED"),
    ("REVIEWING", "MERGED"),
    ("REVIEWING", "CLOSED"),
    ("REVIEWING", "BLOCKED"),
    ("BLOCKED", "ACTIVE"),  # retry, drop, replan
    ("BLOCKED", "REVIEWING"),  # merge what is there
    ("BLOCKED", "MERGED"),
    ("BLOCKED", "CLOSED"),
    ("BLOCKED", "CANCELLED"),
    ("BLOCKED", "FAILED"),
    ("READY", "REVIEWING"),
    ("READY", "ACTIVE"),
    ("READY", "CANCELLED"),
    ("READY", "MERGED"),
    ("READY", "CLOSED"),
    ("SUCCEEDED", "ACTIVE"),
    ("FAILED", "ACTIVE"),
    ("FAILED", "MERGED"),
    ("FAILED", "CLOSED"),
    ("CANCELLED", "ACTIVE"),
    ("CANCELLED", "MERGED"),
    ("CANCELLED", "CLOSED"),
}

PULL_MOVES = {
    ("OPEN", "MERGED"),
    ("OPEN", "CLOSED"),
}

# machine -> (its states, its moves, the module's table, its check function)
MACHINES: dict[str, tuple[type[StrEnum], list[str], set[tuple[str, str]], dict, Callable]] = {
    "task": (
        TaskState,
        [
            "DRAFT",
            "QUEUED",
            "RUNNING",
            "PARKED",
            "SUCCEEDED",
            "FAILED",
            "CANCELLED",
            "HELD",
            "DROPPED",
        ],
        TASK_MOVES,
        TASK_TRANSITIONS,
        check_task,
    ),
    "plan": (
        PlanState,
        ["PLANNING", "SUCCEEDED", "FAILED", "SUPERSEDED"],
        PLAN_MOVES,
        PLAN_TRANSITIONS,
        check_plan,
    ),
    "job": (
        JobState,
        [
            "DRAFT",
            "ACTIVE",
            "REVIEWING",
            "READY",
            "BLOCKED",
            "SUCCEEDED",
            "FAILED",
            "CANCELLED",
            "MERGED",
            "CLOSED",
        ],
        JOB_MOVES,
        JOB_TRANSITIONS,
        check_job,
    ),
    "pull request": (
        PullState,
        ["OPEN", "MERGED", "CLOSED"],
        PULL_MOVES,
        PULL_TRANSITIONS,
        check_pull,
    ),
}

EVERY_PAIR = [
    (machine, current, target)
    for machine, (_, states, _, _, _) in MACHINES.items()
    for current in states
    for target in states
]


@pytest.mark.parametrize("machine", MACHINES)
def test_each_machine_has_exactly_the_states_written_here(machine: str) -> None:
    enum, states, moves, table, _ = MACHINES[machine]
    assert [state.value for state in enum] == states
    assert set(table) == set(enum), f"every {machine} state has a row in its table"
    assert {state for move in moves for state in move} <= set(states)


@pytest.mark.parametrize("machine", MACHINES)
def test_each_table_allows_exactly_the_moves_written_here(machine: str) -> None:
    _, _, moves, table, _ = MACHINES[machine]
    in_module = {(current.value, target.value) for current in table for target in table[current]}
    assert in_module - moves == set(), f"{machine} moves the module allows, not written here"
    assert moves - in_module == set(), f"{machine} moves written here, not allowed by the module"


@pytest.mark.parametrize(
    ("machine", "current", "target"), EVERY_PAIR, ids=[f"{m}:{a}->{b}" for m, a, b in EVERY_PAIR]
)
def test_a_move_is_checked_as_the_table_here_says(machine: str, current: str, target: str) -> None:
    enum, _, moves, _, check = MACHINES[machine]
    if (current, target) in moves:
        assert check(current, enum(target)) is enum(target)
    else:
        with pytest.raises(IllegalTransition, match=f"cannot go from {current} to {target}"):
            check(current, enum(target))
