"""Work that waits on other jobs: ``after = ["job-a"]`` and ``depends_on = ["job-a/task-x"]``.

A job with ``after`` stays DRAFT until every job it names is done (SUCCEEDED, or MERGED
for a job with a pull request); a task that names another job's task stays DRAFT until
that task SUCCEEDED. An upstream that FAILED, was CANCELLED or CLOSED blocks the waiter
with that reason, and an operator retry upstream unblocks it again.

Pure: the waits, and the references and cycles a submitted batch must not have;
:mod:`relay_engine.ops.upstream` applies them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
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
    Blocked names the first dead upstream task, as a task's ``blocked_by`` does."""
    dead = [key for key in upstream if states.get(key) in DEAD_TASKS]
    if dead:
        return Blocked(dead[0])
    pending = tuple(key for key in upstream if states.get(key) not in DONE_TASK_STATES)
    return Waiting(pending) if pending else Ready()


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
