"""Which nodes and edges a job's graph has: its tasks, the review, fix and rebase work
chained after the work it follows, troubleshooters after the task they look into, and a
first column for what the job waits on in other jobs. :mod:`relay_tui.render.graph` lays
them out and draws them.
"""

from __future__ import annotations

from collections.abc import Sequence

from relay_engine.store.read_model.tasks import TaskView
from relay_tui.data.details import JobDetail
from relay_tui.render.graph import GraphNode, node_seconds

LIFECYCLE_KINDS = frozenset({"review", "fix", "rebase"})
UPSTREAM_SECONDS = 1.0  # other jobs' work is not on this job's critical path


def graph_nodes(detail: JobDetail, now: float) -> list[GraphNode]:
    """The job's tasks; review, fix and rebase work chained after the work it follows; each
    troubleshooter after the task it looks into; and a first column of what the job waits
    on in other jobs (``after`` jobs, other jobs' tasks)."""
    tasks = detail.tasks
    first_wave = min((t.wave for t in tasks), default=1)
    after = tuple(f"job:{name}" for name in (detail.job.after if detail.job else ()))
    chained = lifecycle_edges(tasks)
    nodes = [
        GraphNode(
            id=t.task_id,
            label=t.task_id,
            state=t.shown_state,
            wave=t.wave,
            dependencies=chained.get(t.task_id) or _task_edges(t, after),
            seconds=node_seconds(t.story_size, t.started_at, t.finished_at, now),
        )
        for t in tasks
    ]
    upstream = [*after, *sorted({k for t in tasks for k in t.external_deps})]
    nodes += [
        GraphNode(
            id=name,
            label=name.replace("job:", "job ", 1),
            state=detail.upstream.get(name.removeprefix("job:"), "DRAFT"),
            wave=first_wave - 1,
            dependencies=(),
            seconds=UPSTREAM_SECONDS,
        )
        for name in upstream
    ]
    return nodes


def lifecycle_edges(tasks: Sequence[TaskView]) -> dict[str, tuple[str, ...]]:
    """Review, fix and rebase tasks carry no dependencies (they come after all the work):
    draw each after the previous one, the first after the work's last tasks."""
    work = [t for t in tasks if t.kind not in LIFECYCLE_KINDS and not t.parent_key]
    needed = {dep for t in work for dep in t.dependencies}
    previous = tuple(t.task_id for t in work if t.task_id not in needed)
    edges: dict[str, tuple[str, ...]] = {}
    for task in tasks:  # in creation order
        if task.kind in LIFECYCLE_KINDS and not task.dependencies:
            edges[task.task_id] = previous
            previous = (task.task_id,)
    return edges


def _task_edges(task: TaskView, after: tuple[str, ...]) -> tuple[str, ...]:
    if task.parent_key:
        return (task.parent_key.partition("/")[2],)
    own = task.dependencies
    return (*own, *task.external_deps, *(() if own else after))
