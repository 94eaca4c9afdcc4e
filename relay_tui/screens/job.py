"""One job: its dependency graph, its plan rounds (planner and assessor text), its branch."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, VerticalScroll
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Static

from relay_engine.git.diffs import Diff, job_diff
from relay_engine.store.db import Store
from relay_engine.store.schema import Plan, Task
from relay_tui.details import JobDetail, job_detail
from relay_tui.graph import GraphNode, node_seconds, render_graph
from relay_tui.job_facts import engines_text, pull_text, review_text, spend_facts, upstream_text
from relay_tui.messages import DetailRead
from relay_tui.screens.base import ClosesOnce
from relay_tui.screens.main import fit_footer
from relay_tui.views import Snapshot
from relay_tui.widgets.style import styled

NARROW_WIDTH = 120
FACT_SECTIONS = (
    ("Pull request", "job-pr"),
    ("Final review", "job-review"),
    ("Spend", "job-spend"),
    ("Waits on", "job-upstream"),
    ("Engines", "job-engines"),
    ("Branch", "job-branch"),
    ("Plan rounds", "job-plans"),
)


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
            state="BLOCKED" if t.state == "DRAFT" and t.blocked_by else str(t.state),
            wave=t.wave,
            dependencies=chained.get(t.task_id) or _task_edges(t, after),
            seconds=node_seconds(t.story_size, t.started_at, t.finished_at, now),
        )
        for t in tasks
    ]
    upstream = [*after, *sorted({k for t in tasks for k in t.external_deps or ()})]
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


def lifecycle_edges(tasks: list[Task]) -> dict[str, tuple[str, ...]]:
    """Review, fix and rebase tasks carry no dependencies (they come after all the work):
    draw each after the previous one, the first after the work's last tasks."""
    work = [t for t in tasks if t.kind not in LIFECYCLE_KINDS and not t.parent_key]
    needed = {dep for t in work for dep in t.dependencies or ()}
    previous = tuple(t.task_id for t in work if t.task_id not in needed)
    edges: dict[str, tuple[str, ...]] = {}
    for task in tasks:  # in creation order
        if task.kind in LIFECYCLE_KINDS and not task.dependencies:
            edges[task.task_id] = previous
            previous = (task.task_id,)
    return edges


def _task_edges(task: Task, after: tuple[str, ...]) -> tuple[str, ...]:
    if task.parent_key:
        return (task.parent_key.partition("/")[2],)
    own = tuple(task.dependencies or ())
    return (*own, *(task.external_deps or ()), *(() if own else after))


class JobScreen(ClosesOnce, Screen[None]):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="job-close"),
        Binding("C", "app.cancel_job", "Cancel job", id="cancel-job"),
        Binding("p", "app.replan", "Replan", id="replan"),
        Binding("g", "app.approve", "Approve wave", id="approve"),
        Binding("m", "app.merge", "Merge", id="merge"),
        Binding("x", "app.close_pr", "Close PR", id="close-pr"),
        Binding("b", "app.raise_budget", "Raise budget", id="budget"),
    ]

    def __init__(
        self, store: Store, job_id: str, styles: Mapping[str, str], *, lease_seconds: float
    ) -> None:
        super().__init__()
        self.store = store
        self.job_id = job_id
        self.state_styles = styles
        self.lease_seconds = lease_seconds  # an engine silent for longer is shown gone
        self.loaded = threading.Event()
        self.task_count = 0

    def compose(self) -> ComposeResult:
        yield Static(id="job-title")
        with Horizontal(id="job-body"):
            with ScrollableContainer(id="job-graph-box"):
                yield Static(id="job-graph")
            with VerticalScroll(id="job-facts"):
                for section, widget_id in FACT_SECTIONS:
                    yield Static(section, classes="section")
                    yield Static(id=widget_id)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#job-graph-box").border_title = "Dependency graph (by wave)"
        self.reload()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")
        fit_footer(self.query_one(Footer), event.size.width)

    def action_back(self) -> None:
        self.close_once()

    def concerns(self, snapshot: Snapshot) -> bool:
        """Whether a snapshot changed anything this screen shows."""
        return any(key.startswith(f"{self.job_id}/") for key in snapshot.changed_tasks) or any(
            e.job_id == self.job_id and not e.task_key for e in snapshot.new_events
        )

    @work(thread=True, exclusive=True, group="job")
    def reload(self) -> None:
        now = getattr(self.app, "clock", time.time)()
        detail = job_detail(self.store, self.job_id, now=now, lease_seconds=self.lease_seconds)
        job = detail.job
        diff = job_diff(job.repo_path, job.id, job.base_branch) if job else Diff(missing="")
        lines = render_graph(graph_nodes(detail, now), self.state_styles)
        self.post_message(DetailRead(lambda: self._show(detail, diff, lines)))

    @on(DetailRead)
    def _detail_read(self, message: DetailRead) -> None:
        message.show()

    def _show(self, detail: JobDetail, diff: Diff, graph: list[Text]) -> None:
        if not self.is_attached:  # closed while the worker read
            return
        job = detail.job
        title = self.query_one("#job-title", Static)
        if job is None:
            title.update(Text(f"job {self.job_id}: not found"))
            self.loaded.set()
            return
        self.task_count = len(detail.tasks)
        head = Text.assemble((f" {job.id} ", "bold reverse"), " ", job.title or "", "  ")
        head.append_text(styled(str(job.state).lower(), str(job.state), self.state_styles))
        head.append(f" · {job.mode} · {job.priority} · wave gate {job.wave_gate}")
        head.append(" · auto-merge" if job.auto_merge else "")
        title.update(head)
        self.query_one("#job-graph", Static).update(Text("\n").join(graph))
        styles = self.state_styles
        facts = {
            "job-pr": pull_text(detail.pr, job, styles),
            "job-review": review_text(detail.reviews, detail.pr),
            "job-spend": spend_facts(job, detail.spend, styles),
            "job-upstream": upstream_text(job, detail.upstream, styles),
            "job-engines": engines_text(detail.engines, styles),
            "job-branch": branch_text(diff),
            "job-plans": plans_text(detail, styles),
        }
        for widget_id, text in facts.items():
            text.rstrip()
            self.query_one(f"#{widget_id}", Static).update(text)
        self.loaded.set()


def branch_text(diff: Diff) -> Text:
    if diff.missing:
        return Text(diff.missing, style="dim")
    text = Text(f"{diff.branch} → {diff.base}\n", style="bold")
    text.append(diff.stat.strip() or "no changes yet")
    return text


def plans_text(detail: JobDetail, styles: Mapping[str, str]) -> Text:
    """Each round: trigger, guidance, status; the planner's assessment; the assessor's verdicts."""
    text = Text()
    if not detail.plans:
        text.append("No planner rounds: the tasks were given in the job file.\n", style="dim")
    for plan in detail.plans:
        text.append_text(_plan_text(plan, styles))
    assessments = [t for t in detail.tasks if t.kind == "assess" and t.result_summary]
    if assessments:
        text.append("\nAssessor\n", style="bold")
        for task in assessments:
            text.append(f"{task.title}: ", style="italic")
            text.append(f"{task.result_summary}\n")
    if detail.job is not None and detail.job.error:
        text.append("\nWhy it ended: ", style="bold")
        text.append(detail.job.error)
    return text


def _plan_text(plan: Plan, styles: Mapping[str, str]) -> Text:
    text = Text()
    text.append(f"round {plan.round} ", style="bold")
    text.append_text(styled(str(plan.status).lower(), str(plan.status), styles))
    text.append(f" · {plan.trigger}")
    if plan.objective_status:
        text.append(f" · objective {plan.objective_status.replace('_', ' ')}")
    text.append("\n")
    if plan.guidance:
        text.append(f"  guidance: “{plan.guidance}”\n", style="italic")
    if plan.assessment:
        text.append(f"  planner: {plan.assessment}\n")
    if plan.generated_task_ids:
        text.append(f"  planned: {', '.join(plan.generated_task_ids)}\n", style="dim")
    problem = plan.error or plan.rejection
    if problem:
        text.append(f"  {'failed' if plan.error else 'rejected'}: {problem}\n", style="red")
    return text
