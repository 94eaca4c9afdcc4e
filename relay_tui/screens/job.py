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
from textual.widgets import Static

from relay_engine.git.diffs import Diff, job_diff
from relay_engine.store.db import Store
from relay_tui.data.details import JobDetail, job_detail
from relay_tui.data.snapshot import Snapshot
from relay_tui.messages import DetailRead
from relay_tui.render.graph import render_graph
from relay_tui.render.job_facts import (
    branch_text,
    engines_text,
    held_text,
    plans_text,
    pull_text,
    review_text,
    spend_facts,
    upstream_text,
    waits_text,
)
from relay_tui.render.job_graph import graph_nodes
from relay_tui.render.styles import styled
from relay_tui.screens.base import ClosesOnce, closable_while_mounting, pane_keys
from relay_tui.widgets.keybar import KeyBar

NARROW_WIDTH = 120
FACT_SECTIONS = (
    ("Waiting", "job-waits"),
    ("Pull request", "job-pr"),
    ("Final review", "job-review"),
    ("Spend", "job-spend"),
    ("Waits on", "job-upstream"),
    ("By hand", "job-held"),
    ("Engines", "job-engines"),
    ("Branch", "job-branch"),
    ("Plan rounds", "job-plans"),
)


class JobScreen(ClosesOnce, Screen[None]):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="job-close"),
        Binding("C", "app.cancel_job", "Cancel job", id="cancel-job"),
        Binding("p", "app.replan", "Replan", id="replan"),
        Binding("g", "app.approve", "Approve wave", id="approve"),
        Binding("m", "app.merge", "Merge", id="merge"),
        Binding("x", "app.close_pr", "Close PR", id="close-pr"),
        Binding("b", "app.raise_budget", "Raise budget", id="budget"),
        *pane_keys(),
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
        yield KeyBar()

    @closable_while_mounting
    def on_mount(self) -> None:
        self.query_one("#job-graph-box").border_title = "Dependency graph (by wave)"
        self.reload()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")

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
        head = Text.assemble((f" {job.id} ", "bold reverse"), " ", job.title, "  ")
        head.append_text(styled(job.shown_state.lower(), job.shown_state, self.state_styles))
        head.append(f" · {job.mode} · {job.priority} · wave gate {job.wave_gate}")
        head.append(" · auto-merge" if job.auto_merge else "")
        title.update(head)
        self.query_one("#job-graph", Static).update(Text("\n").join(graph))
        styles = self.state_styles
        facts = {
            "job-waits": waits_text(detail.waits, styles),
            "job-pr": pull_text(job.pr, job, styles),
            "job-review": review_text(detail.reviews, job),
            "job-spend": spend_facts(job, styles),
            "job-upstream": upstream_text(job, detail.upstream, styles),
            "job-held": held_text(detail.tasks, getattr(self.app, "clock", time.time)(), styles),
            "job-engines": engines_text(detail.engines, styles),
            "job-branch": branch_text(diff),
            "job-plans": plans_text(detail, styles),
        }
        for widget_id, text in facts.items():
            text.rstrip()
            self.query_one(f"#{widget_id}", Static).update(text)
        self.loaded.set()
