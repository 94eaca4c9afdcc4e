"""Which tasks become ready, in what order queued tasks dispatch, and which fit this tick.

Pure: the engine maps its rows into `TaskFacts` and acts on the plans returned here. Every
function is linear or n log n in the number of tasks, because the engine tick calls them
over the whole queue (10,000 tasks must stay fast), and nothing recurses, because a chain of
dependencies can be as long as the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from relay_engine.contracts.task_definitions import find_cycles
from relay_engine.core.states import DONE_TASK_STATES, TaskState

PRIORITIES = ("P0", "P1", "P2", "P3")
_RANK = {p: i for i, p in enumerate(PRIORITIES)}
_BLOCKING = frozenset({TaskState.FAILED, TaskState.CANCELLED})


@dataclass(frozen=True)
class TaskFacts:
    key: str  # "JOB/TASK"
    job_id: str
    task_id: str
    state: TaskState
    priority: str  # "P0".."P3"
    created_at: float
    dependencies: tuple[str, ...]  # task_ids within the same job
    workstream: str | None = None
    resumed_at: float | None = None  # back in QUEUED after a provider limit: dispatch first
    parked_at: float | None = None
    execution_id: str | None = None  # QUEUED with an execution id = claimed, about to start
    wave_gate_blocked: bool = False
    lock_dir: str | None = None  # a directory it shares with its job's other tasks (not git)


def _frozen_map(items: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(items)


@dataclass(frozen=True)
class Readiness:
    to_queue: tuple[str, ...]  # keys, sorted
    blocked: Mapping[str, str] = field(default_factory=lambda: _frozen_map({}))


@dataclass(frozen=True)
class DispatchPlan:
    chosen: tuple[str, ...]  # keys, in dispatch order
    skipped: Mapping[str, str] = field(default_factory=lambda: _frozen_map({}))


def priority_rank(p: str) -> int:
    """P0 -> 0 .. P3 -> 3. An unknown priority ranks after P3 so bad data delays a task
    instead of crashing the tick."""
    return _RANK.get(p, len(PRIORITIES))


def readiness(
    drafts: Iterable[TaskFacts], dependency_states: Mapping[tuple[str, str], TaskState]
) -> Readiness:
    """A failed or cancelled dependency blocks a draft rather than failing it, so a retry of
    that dependency can still unblock it later."""
    to_queue: list[str] = []
    blocked: dict[str, str] = {}
    for task in drafts:
        if task.state != TaskState.DRAFT:
            continue
        deps = sorted(set(task.dependencies))
        states = [dependency_states.get((task.job_id, d)) for d in deps]
        blocker = next((d for d, s in zip(deps, states, strict=True) if s in _BLOCKING), None)
        if blocker is not None:
            blocked[task.key] = blocker
        elif all(s in DONE_TASK_STATES for s in states):
            to_queue.append(task.key)
    return Readiness(tuple(sorted(to_queue)), _frozen_map(blocked))


def _order_key(task: TaskFacts) -> tuple[int, int, float, float, str]:
    resumed = task.resumed_at is not None
    parked_at = (task.parked_at or 0.0) if resumed else 0.0
    return (0 if resumed else 1, priority_rank(task.priority), parked_at, task.created_at,
            task.key)  # fmt: skip


def dispatch_order(queued: Iterable[TaskFacts]) -> list[TaskFacts]:
    """Work that already waited out a provider limit goes first: it was dispatched once and
    lost its turn through no fault of its own. Among those, and among the rest, the most
    urgent first, then the longest waiting: a P3 task parked with a P0 resumes after it."""
    return sorted(queued, key=_order_key)


def scope_locks(task: TaskFacts) -> tuple[str, ...]:
    """Sorted, so every holder takes its locks in the same order and never deadlocks."""
    locks = []
    if task.workstream:
        locks.append(f"ws:{task.job_id}:{task.workstream}")
    if task.lock_dir:
        locks.append(f"dir:{task.lock_dir}")
    return tuple(sorted(locks))


def _is_candidate(task: TaskFacts) -> bool:
    return task.state == TaskState.QUEUED and task.execution_id is None


def plan_dispatch(
    queued: Iterable[TaskFacts], running: Iterable[TaskFacts], capacity: int
) -> DispatchPlan:
    """`running` holds RUNNING and claimed tasks: both occupy a slot and their scope locks.
    Tasks in `queued` that are not unclaimed QUEUED are ignored (neither chosen nor skipped)."""
    busy = {t.key: t for t in running}
    held = {lock for t in busy.values() for lock in scope_locks(t)}
    free = max(capacity, 0) - len(busy)
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    candidates = [t for t in queued if _is_candidate(t) and t.key not in busy]
    for task in dispatch_order(candidates):
        taken = [lock for lock in scope_locks(task) if lock in held]
        if task.wave_gate_blocked:
            skipped[task.key] = "wave gate"
        elif taken:
            skipped[task.key] = f"scope lock {taken[0]}"
        elif len(chosen) >= free:
            skipped[task.key] = "capacity"
        else:
            chosen.append(task.key)
            held.update(scope_locks(task))
    return DispatchPlan(tuple(chosen), _frozen_map(skipped))


def _materialize(dependencies: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """Deps may be one-shot iterables; read each once, drop duplicates, keep order."""
    return {t: tuple(dict.fromkeys(ds)) for t, ds in dependencies.items()}


def waves(dependencies: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Wave = dependency depth, so every task's wave is after all of its dependencies'.
    Dependencies outside the mapping are treated as already satisfied. Raises ValueError
    on a cycle, since a cyclic graph has no depth."""
    deps = _materialize(dependencies)
    dependents: dict[str, list[str]] = {t: [] for t in deps}
    pending: dict[str, int] = {}
    for task, ds in deps.items():
        inside = [d for d in ds if d in deps]
        pending[task] = len(inside)
        for d in inside:
            dependents[d].append(task)
    wave = dict.fromkeys(deps, 1)
    frontier = [t for t, n in pending.items() if n == 0]
    done = 0
    while frontier:
        task = frontier.pop()
        done += 1
        for t in dependents[task]:
            wave[t] = max(wave[t], wave[task] + 1)
            pending[t] -= 1
            if pending[t] == 0:
                frontier.append(t)
    if done < len(deps):
        raise ValueError(f"dependency cycle: {' -> '.join(_a_cycle(deps))}")
    return wave


def _a_cycle(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """A cycle to name in the error: a task that depends on itself, else the first tangle."""
    looped = next((t for t, ds in deps.items() if t in ds), None)
    if looped is not None:
        return [looped, looped]
    cycles = find_cycles(deps)
    return cycles[0] if cycles else []
