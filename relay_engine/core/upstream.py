"""Work that waits on other jobs: ``after = ["job-a"]`` and ``depends_on = ["job-a/task-x"]``.

A job with ``after`` stays DRAFT until every job it names is done (SUCCEEDED, or MERGED
for a job with a pull request); a task that names another job's task stays DRAFT until
that task SUCCEEDED. An upstream that FAILED, was CANCELLED or CLOSED blocks the waiter
with that reason, and an operator retry upstream unblocks it again.

Pure: the waits, and the references and cycles a submitted batch must not have;
:mod:`relay_engine.ops.upstream` applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from relay_engine.contracts.job_file import JobSpec
from relay_engine.contracts.keys import task_key
from relay_engine.contracts.task_definitions import (
    Problem,
    external_deps,
    find_cycles,
    item_label,
    local_deps,
)
from relay_engine.core.states import DONE_JOB_STATES, DONE_TASK_STATES, JobState, TaskState

DEAD_JOBS = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.CLOSED})
DEAD_TASKS = frozenset({TaskState.FAILED, TaskState.CANCELLED})


@dataclass(frozen=True)
class Ready:
    pass


@dataclass(frozen=True)
class Waiting:
    on: tuple[str, ...]


@dataclass(frozen=True)
class Blocked:
    reason: str


Wait = Ready | Waiting | Blocked


def job_wait(after: Sequence[str], states: Mapping[str, str]) -> Wait:
    """Whether a job waiting on ``after`` may start, given those jobs' states. An upstream
    that is BLOCKED blocks it too, until the operator saves that one."""
    dead = [job for job in after if states.get(job) in (*DEAD_JOBS, JobState.BLOCKED)]
    if dead:
        return Blocked(", ".join(f"job {job} {states[job].lower()}" for job in dead))
    pending = tuple(job for job in after if states.get(job) not in DONE_JOB_STATES)
    return Waiting(pending) if pending else Ready()


def task_wait(upstream: Sequence[str], states: Mapping[str, str]) -> Wait:
    """Whether a task's dependencies in other jobs let it queue, given their states.
    Blocked names the first dead upstream task, as a task's ``blocked_by`` does.

    An entry without a ``/`` is a whole job a planner made the task wait on: done when
    that job is (merged, or succeeded with nothing to merge); a job that failed, was
    cancelled or closed, or is BLOCKED, blocks the task as ``job NAME``."""
    dead = [key for key in upstream if _dead(key, states.get(key))]
    if dead:
        return Blocked(dead[0] if "/" in dead[0] else f"job {dead[0]}")
    pending = tuple(key for key in upstream if not _done(key, states.get(key)))
    return Waiting(pending) if pending else Ready()


def _dead(entry: str, state: str | None) -> bool:
    if "/" in entry:
        return state in DEAD_TASKS
    return state in (*DEAD_JOBS, JobState.BLOCKED)


def _done(entry: str, state: str | None) -> bool:
    return state in (DONE_TASK_STATES if "/" in entry else DONE_JOB_STATES)


def blocker_of(reason: str | None) -> str | None:
    """The upstream entry a task's ``blocked_by`` names (``job NAME`` is a job), if any."""
    if reason is None:
        return None
    if reason.startswith("job ") and "/" not in reason:
        return reason.removeprefix("job ")
    return reason if "/" in reason else None


def wait_path(
    edges: Callable[[str], Iterable[str]], start: str, goal: str, *, limit: int = 10_000
) -> list[str] | None:
    """The first path of waits from ``start`` to ``goal`` (both included), or None.

    A node is a job id or a ``JOB/TASK`` key; ``edges`` says what a node waits on. A
    planner's blocker from one of job G's new tasks onto ``start`` closes a circle exactly
    when ``start`` waits, through any chain, on G itself: G is the only way to its new
    tasks, which nothing stored waits on yet."""
    parents: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier and len(parents) < limit:
        node = frontier.pop(0)
        if node == goal:
            path = [node]
            while (parent := parents[path[-1]]) is not None:
                path.append(parent)
            return path[::-1]
        for following in edges(node):
            if following not in parents:
                parents[following] = node
                frontier.append(following)
    return None


# --- submit: references and cycles ------------------------------------------------------


def reference_problems(
    spec: JobSpec, known_jobs: Collection[str], known_tasks: Collection[str]
) -> list[Problem]:
    """Every ``after`` job and ``job/task`` dependency must exist (stored, or in the batch)."""
    job = spec.job
    problems = [
        Problem(
            f"job.after[{i}]",
            f"unknown job {name!r}" if name != job.id else "a job cannot wait on itself",
        )
        for i, name in enumerate(job.after)
        if name == job.id or name not in known_jobs
    ]
    for index, task in enumerate(spec.tasks):
        for dep in external_deps(task.depends_on):
            owner = dep.partition("/")[0]
            if owner == job.id:
                message = f"{dep!r} is in this job: write it as {dep.partition('/')[2]!r}"
            elif dep in known_tasks:
                continue
            elif owner not in known_jobs:
                message = f"depends on task {dep!r} of unknown job {owner!r}"
            else:
                message = f"job {owner!r} has no task {dep.partition('/')[2]!r}"
            problems.append(Problem(f"{item_label('tasks', index, task)}.depends_on", message))
    return problems


def batch_graph(specs: Sequence[JobSpec]) -> dict[str, list[str]]:
    """What waits on what across a batch: a task on its dependencies and on the jobs its
    job comes after; a job (as a node) on its own tasks, since it is done when they are."""
    graph: dict[str, list[str]] = {}
    for spec in specs:
        job_id = spec.job.id
        graph[job_id] = [task_key(job_id, t.id) for t in spec.tasks]
        for task in spec.tasks:
            deps = [task_key(job_id, d) for d in local_deps(task.depends_on)]
            graph[task_key(job_id, task.id)] = [
                *deps,
                *external_deps(task.depends_on),
                *spec.job.after,
            ]
    return graph


def batch_cycles(specs: Sequence[JobSpec]) -> list[list[str]]:
    """Cycles that cross jobs. Stored jobs never wait on new ones, so any cycle a batch
    could close runs through the batch alone."""
    return [cycle for cycle in find_cycles(batch_graph(specs)) if _crosses_jobs(cycle)]


def _crosses_jobs(cycle: Sequence[str]) -> bool:
    return len({node.partition("/")[0] for node in cycle}) > 1


def closing_field(specs: Sequence[JobSpec], cycle: Sequence[str]) -> tuple[JobSpec, str]:
    """The file and field of the first step of ``cycle`` that leaves a task's own job:
    a ``JOB/TASK`` dependency, or the job's ``after``."""
    for node, following in pairwise(cycle):
        job_id, _, task_id = node.partition("/")
        if task_id and following.partition("/")[0] != job_id:
            spec = next(s for s in specs if s.job.id == job_id)
            if "/" not in following:
                return spec, "job.after"
            index = next(i for i, t in enumerate(spec.tasks) if t.id == task_id)
            return spec, f"{item_label('tasks', index, spec.tasks[index])}.depends_on"
    raise AssertionError("a cross-job cycle leaves some job")


def node_name(node: str) -> str:
    return node if "/" in node else f"job {node}"
