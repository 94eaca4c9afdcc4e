from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay_engine.contracts.task_definitions import find_cycles
from relay_engine.core.scheduler import (
    DispatchPlan,
    TaskFacts,
    dispatch_order,
    plan_dispatch,
    priority_rank,
    readiness,
    scope_locks,
    waves,
)
from relay_engine.core.states import TaskState

Q = TaskState.QUEUED
D = TaskState.DRAFT
R = TaskState.RUNNING
S = TaskState.SUCCEEDED
F = TaskState.FAILED
C = TaskState.CANCELLED


def task(
    task_id: str,
    state: TaskState = Q,
    *,
    job: str = "J",
    priority: str = "P2",
    created_at: float = 0.0,
    deps: tuple[str, ...] = (),
    workstream: str | None = None,
    resumed_at: float | None = None,
    parked_at: float | None = None,
    execution_id: str | None = None,
    gated: bool = False,
) -> TaskFacts:
    return TaskFacts(
        key=f"{job}/{task_id}",
        job_id=job,
        task_id=task_id,
        state=state,
        priority=priority,
        created_at=created_at,
        dependencies=deps,
        workstream=workstream,
        resumed_at=resumed_at,
        parked_at=parked_at,
        execution_id=execution_id,
        wave_gate_blocked=gated,
    )


# --- readiness -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deps", "states", "queued", "blocked_by"),
    [
        ((), {}, True, None),
        (("a",), {"a": S}, True, None),
        (("a", "b"), {"a": S, "b": S}, True, None),
        (("a", "b"), {"a": S, "b": R}, False, None),
        (("a",), {"a": Q}, False, None),
        (("a",), {"a": D}, False, None),
        (("a",), {}, False, None),  # missing dependency: not ready, no crash
        (("a",), {"a": F}, False, "a"),
        (("a",), {"a": C}, False, "a"),
        (("c", "b", "a"), {"a": S, "b": C, "c": F}, False, "b"),  # first sorted blocker
        (("a", "b"), {"a": R, "b": F}, False, "b"),
    ],
)
def test_readiness_rules(deps, states, queued, blocked_by):
    result = readiness([task("t", D, deps=deps)], {("J", d): s for d, s in states.items()})
    assert result.to_queue == (("J/t",) if queued else ())
    assert dict(result.blocked) == ({"J/t": blocked_by} if blocked_by else {})


def test_readiness_looks_up_dependencies_in_the_tasks_own_job():
    drafts = [task("t", D, job="J1", deps=("a",)), task("t", D, job="J2", deps=("a",))]
    result = readiness(drafts, {("J1", "a"): S, ("J2", "a"): R})
    assert result.to_queue == ("J1/t",)


def test_readiness_ignores_tasks_that_are_not_drafts():
    assert readiness([task("t", Q), task("u", R)], {}).to_queue == ()


# --- dispatch_order --------------------------------------------------------------------


def test_priority_rank():
    assert [priority_rank(p) for p in ("P0", "P1", "P2", "P3")] == [0, 1, 2, 3]
    assert priority_rank("bogus") > priority_rank("P3")


def test_dispatch_order_priority_then_age_then_key():
    tasks = [
        task("late-p0", priority="P0", created_at=5),
        task("p3", priority="P3", created_at=0),
        task("b", priority="P1", created_at=1),
        task("a", priority="P1", created_at=1),
        task("early-p0", priority="P0", created_at=2),
    ]
    assert [t.task_id for t in dispatch_order(tasks)] == ["early-p0", "late-p0", "a", "b", "p3"]


def test_resumed_tasks_go_before_everything_by_priority_then_parked_at():
    tasks = [
        task("urgent", priority="P0", created_at=0),
        task("r3", priority="P3", resumed_at=9, parked_at=1),
        task("r2", priority="P3", resumed_at=9, parked_at=5),
        task("r1", priority="P3", resumed_at=9, parked_at=2, created_at=2),
        task("r0", priority="P3", resumed_at=9, parked_at=2, created_at=1),
        task("hit-it", priority="P0", resumed_at=9, parked_at=7),  # parked last, runs first
    ]
    order = [t.task_id for t in dispatch_order(tasks)]
    assert order == ["hit-it", "r3", "r0", "r1", "r2", "urgent"]


# --- plan_dispatch ---------------------------------------------------------------------


def test_scope_locks():
    assert scope_locks(task("t", workstream="api")) == ("ws:J:api",)
    assert scope_locks(task("t")) == ()


def test_capacity_limits_running_plus_chosen():
    queued = [task("a", created_at=1), task("b", created_at=2), task("c", created_at=3)]
    plan = plan_dispatch(queued, [task("r", R)], capacity=3)
    assert plan == DispatchPlan(("J/a", "J/b"), {"J/c": "capacity"})


def test_claimed_tasks_hold_capacity_and_are_not_candidates():
    claimed = task("c", Q, execution_id="e1")
    plan = plan_dispatch([claimed, task("a")], [claimed], capacity=1)
    assert plan.chosen == ()
    assert dict(plan.skipped) == {"J/a": "capacity"}


def test_claimed_task_in_queued_is_never_chosen():
    plan = plan_dispatch([task("c", execution_id="e1"), task("a")], [], capacity=5)
    assert plan.chosen == ("J/a",)
    assert "J/c" not in plan.skipped


def test_workstream_held_by_running_task_blocks_its_peers():
    plan = plan_dispatch(
        [task("a", workstream="api"), task("b", workstream="ui")],
        [task("r", R, workstream="api")],
        capacity=10,
    )
    assert plan.chosen == ("J/b",)
    assert dict(plan.skipped) == {"J/a": "scope lock ws:J:api"}


def test_two_tasks_of_one_workstream_are_not_chosen_together():
    plan = plan_dispatch(
        [task("a", workstream="api", created_at=1), task("b", workstream="api", created_at=2)],
        [],
        capacity=10,
    )
    assert plan.chosen == ("J/a",)
    assert dict(plan.skipped) == {"J/b": "scope lock ws:J:api"}


def test_same_workstream_name_in_different_jobs_does_not_conflict():
    plan = plan_dispatch(
        [task("a", job="J1", workstream="api"), task("a", job="J2", workstream="api")],
        [],
        capacity=10,
    )
    assert set(plan.chosen) == {"J1/a", "J2/a"}


def test_wave_gate_blocked_tasks_are_skipped():
    plan = plan_dispatch([task("a", gated=True), task("b")], [], capacity=10)
    assert plan.chosen == ("J/b",)
    assert dict(plan.skipped) == {"J/a": "wave gate"}


def test_chosen_follow_dispatch_order():
    queued = [task("low", priority="P3"), task("high", priority="P0")]
    assert plan_dispatch(queued, [], capacity=1).chosen == ("J/high",)


def test_zero_or_exhausted_capacity_chooses_nothing():
    assert plan_dispatch([task("a")], [], capacity=0).chosen == ()
    assert plan_dispatch([task("a")], [task("r", R), task("s", R)], capacity=1).chosen == ()


def test_non_queued_tasks_are_ignored():
    plan = plan_dispatch([task("d", D), task("r", R), task("p", TaskState.PARKED)], [], 10)
    assert plan == DispatchPlan((), {})


# --- waves / find_cycle ----------------------------------------------------------------


def test_waves_depth():
    deps = {"a": [], "b": ["a"], "c": ["a", "b"], "d": ["outside"], "e": ["c", "d"]}
    assert waves(deps) == {"a": 1, "b": 2, "c": 3, "d": 1, "e": 4}


def test_waves_long_chain_does_not_recurse():
    n = 10_000
    deps = {f"t{i}": [f"t{i - 1}"] if i else [] for i in range(n)}
    assert waves(deps)[f"t{n - 1}"] == n
    assert find_cycles(deps) == []


def test_waves_rejects_cycles():
    with pytest.raises(ValueError, match="cycle"):
        waves({"a": ["b"], "b": ["a"]})


def test_waves_names_the_cycle():
    with pytest.raises(ValueError, match=r"dependency cycle: a -> b -> c -> a"):
        waves({"a": ["b"], "b": ["c"], "c": ["a"]})
    with pytest.raises(ValueError, match=r"dependency cycle: x -> x"):
        waves({"x": ["x"]})


def test_find_cycles_examples():
    """Each cycle starts at the tangle's first node in the graph's own (file) order."""
    assert find_cycles({"a": ["b"], "b": ["c"], "c": ["a"]}) == [["a", "b", "c", "a"]]
    assert find_cycles({"c": ["a"], "a": ["b"], "b": ["c"]}) == [["c", "a", "b", "c"]]
    assert find_cycles({"x": ["x"]}) == []  # a self-dependency is reported on its own
    assert find_cycles({"a": ["b"], "b": ["missing"]}) == []
    assert find_cycles({}) == []


def test_find_cycles_long_cycle_is_iterative():
    n = 10_000
    deps = {f"t{i:05d}": [f"t{(i + 1) % n:05d}"] for i in range(n)}
    (cycle,) = find_cycles(deps)
    assert len(cycle) == n + 1
    assert cycle[0] == cycle[-1] == "t00000"


# --- properties on random DAGs ---------------------------------------------------------

# Weighted towards QUEUED so plans have several candidates competing for slots and locks.
STATES = [Q, Q, Q, Q, R, D, D, S, F, C, TaskState.PARKED]


@st.composite
def dags(draw, max_size: int = 25) -> dict[str, tuple[str, ...]]:
    """Edges only from a higher index to a lower one, so the graph is acyclic."""
    n = draw(st.integers(0, max_size))
    deps: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        lower = draw(st.sets(st.integers(0, i - 1), max_size=4)) if i else set()
        deps[f"t{i:02d}"] = tuple(f"t{j:02d}" for j in sorted(lower))
    return deps


@st.composite
def task_sets(draw) -> list[TaskFacts]:
    deps = draw(dags(15))
    tasks = []
    for i, (tid, ds) in enumerate(deps.items()):
        state = draw(st.sampled_from(STATES))
        resumed = draw(st.booleans()) and state == Q
        tasks.append(
            task(
                tid,
                state,
                job=draw(st.sampled_from(["J1", "J2"])),
                priority=draw(st.sampled_from(["P0", "P1", "P2", "P3"])),
                created_at=float(draw(st.integers(0, 5))),
                deps=ds,
                workstream=draw(st.sampled_from([None, "api", "ui", "db"])),
                resumed_at=100.0 if resumed else None,
                parked_at=float(draw(st.integers(0, 3))) if resumed else None,
                execution_id=f"e{i}" if state == Q and draw(st.integers(0, 3)) == 0 else None,
                gated=draw(st.integers(0, 3)) == 0,
            )
        )
    return tasks


@settings(max_examples=200, deadline=None)
@given(tasks=task_sets(), capacity=st.integers(0, 8))
def test_plan_dispatch_properties(tasks, capacity):
    running = [t for t in tasks if t.state == R or (t.state == Q and t.execution_id)]
    queued = [t for t in tasks if t.state == Q]
    plan = plan_dispatch(queued, running, capacity)
    by_key = {t.key: t for t in tasks}
    chosen = [by_key[k] for k in plan.chosen]

    assert len(chosen) == len(set(plan.chosen))
    assert len(chosen) == 0 or len(running) + len(chosen) <= capacity
    held = {lock for t in running for lock in scope_locks(t)}
    for t in chosen:
        assert t.state == Q and t.execution_id is None and not t.wave_gate_blocked
        assert not held & set(scope_locks(t))
        held.update(scope_locks(t))  # also catches two chosen tasks sharing a workstream
    assert set(plan.chosen).isdisjoint(plan.skipped)

    order = [t.key for t in dispatch_order(t for t in queued if t.execution_id is None)]
    assert list(plan.chosen) == [k for k in order if k in set(plan.chosen)]
    position = {k: i for i, k in enumerate(order)}
    for key, reason in plan.skipped.items():
        if reason == "capacity":
            assert all(position[c] < position[key] for c in plan.chosen)
    # every unclaimed candidate is either chosen or skipped with a reason
    assert set(order) == set(plan.chosen) | set(plan.skipped)


@settings(max_examples=200, deadline=None)
@given(tasks=task_sets())
def test_readiness_queues_only_drafts_with_all_deps_succeeded(tasks):
    states = {(t.job_id, t.task_id): t.state for t in tasks}
    result = readiness(tasks, states)
    by_key = {t.key: t for t in tasks}
    for key in result.to_queue:
        t = by_key[key]
        assert t.state == D
        assert all(states.get((t.job_id, d)) == S for d in t.dependencies)
    for key, blocker in result.blocked.items():
        t = by_key[key]
        assert t.state == D and blocker in t.dependencies
        assert states[(t.job_id, blocker)] in (F, C)
    for t in tasks:
        if t.state == D and all(states.get((t.job_id, d)) == S for d in t.dependencies):
            assert t.key in result.to_queue


@settings(max_examples=200, deadline=None)
@given(deps=dags(30))
def test_waves_respect_dependencies(deps):
    w = waves(deps)
    assert set(w) == set(deps)
    for t, ds in deps.items():
        if not ds:
            assert w[t] == 1
        else:
            assert w[t] == 1 + max(w[d] for d in ds)


@settings(max_examples=200, deadline=None)
@given(deps=dags(30), data=st.data())
def test_find_cycles_none_on_dags_and_real_cycle_with_back_edge(deps, data):
    assert find_cycles(deps) == []
    edges = [(t, d) for t, ds in deps.items() for d in ds]
    if not edges:
        return
    high, low = data.draw(st.sampled_from(edges))
    cyclic = {t: list(ds) for t, ds in deps.items()}
    cyclic[low].append(high)  # back edge: low now depends on high, which depends on low
    cycles = find_cycles(cyclic)
    assert cycles
    cycle = cycles[0]
    assert cycle[0] == cycle[-1]
    assert len(set(cycle[:-1])) == len(cycle) - 1
    for a, b in itertools.pairwise(cycle):
        assert b in cyclic[a]
