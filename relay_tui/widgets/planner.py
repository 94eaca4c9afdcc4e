"""The Planner waves table: per job, its planner rounds (trigger, guidance, status) and its
waves' progress, with the wave gate that waits for ``g`` (or that a failed assessment holds
shut until the operator approves)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.text import Text

from relay_engine.core.states import PlanState
from relay_engine.store.read_model.jobs import JobView
from relay_engine.store.read_model.plans import PlanView
from relay_tui.data.snapshot import Snapshot, WaveView
from relay_tui.render.spend import budget_words
from relay_tui.render.styles import bar, clip, styled
from relay_tui.widgets.live_table import NOTE_CHARS, LiveTable, Row


class PlannerTable(LiveTable):
    COLUMNS = (
        ("what", "Round/wave", 10),
        ("status", "Status", 11),
        ("progress", "Progress", 14),
        ("notes", "Trigger · guidance", 8),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"status": 1, "progress": 1, "notes": 3}

    def build_rows(self, snapshot: Snapshot, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for job in snapshot.jobs:
            rows.append((f"job:{job.id}", (Text(job.id, style="bold", end=""), "", "", "")))
            for plan in (p for p in snapshot.plans if p.job_id == job.id):
                rows.append(plan_row(plan, styles, plan_wait(plan, job, snapshot)))
            for wave in (w for w in snapshot.waves if w.job_id == job.id):
                rows.append(wave_progress_row(wave, styles))
        return rows

    def apply(self, snapshot: Snapshot, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, styles), keep_order=True)

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        if key is not None and key.startswith("wave:"):
            return wave_preview(key, snapshot)
        if key is None or not key.startswith("plan:"):
            return ""
        plan = next((p for p in snapshot.plans if f"plan:{p.id}" == key), None)
        if plan is None:
            return ""
        parts = [f"{plan.job_id} round {plan.round} ({plan.trigger})"]
        parts += [f"guidance “{plan.guidance}”"] if plan.guidance else []
        job = snapshot.job(plan.job_id)
        wait = plan_wait(plan, job, snapshot) if job else None
        parts += [wait or plan.error or plan.rejection or plan.assessment or ""]
        return ": ".join(p for p in parts if p)


def wave_preview(key: str, snapshot: Snapshot) -> str:
    """A held or gated wave: what its tasks wait for and the command that opens it."""
    _, job_id, number = key.split(":", 2)
    keys = {t.key for t in snapshot.tasks.values() if t.job_id == job_id and str(t.wave) == number}
    waits = [w for k in sorted(keys) if (w := snapshot.task_wait(k)) is not None]
    if not waits:
        return ""
    many = "tasks wait" if len(waits) > 1 else "task waits"
    return f"{job_id} wave {number}: {len(waits)} {many} for {waits[0].note()}"


def plan_wait(plan: PlanView, job: JobView, snapshot: Snapshot) -> str | None:
    """Why a round that should be planning is not running: its job's budget, or no planner
    agent able to work, or no engine to run it."""
    if plan.status != PlanState.PLANNING or any(r.plan_id == plan.id for r in snapshot.runs):
        return None
    if job.budget_exhausted:
        return f"held: {budget_words(job)} — b raises it"
    planners = [a for a in snapshot.agent_rows if "planner" in a.roles and a.enabled]
    if snapshot.agent_rows and planners and all(a.status != "ready" for a in planners):
        names = ", ".join(f"{a.id} {a.summary}" for a in planners[:2])
        return f"held: no planner can work ({names})"
    if snapshot.fleet.engines_alive == 0:
        return "waiting for an engine to run it"
    return "waiting to start"


def plan_row(plan: PlanView, styles: Mapping[str, str], wait: str | None = None) -> Row:
    note = plan.trigger + (f" · “{plan.guidance}”" if plan.guidance else "")
    objective = plan.objective_status or ""
    status = styled(plan.status.lower(), plan.status, styles)
    if wait is not None:
        note = f"{wait} · {note}"
        status = styled("held" if wait.startswith("held") else "waiting", "PARKED", styles)
    return (
        f"plan:{plan.id}",
        (
            f"├ round {plan.round}",
            status,
            objective.replace("_", " "),
            clip(note, NOTE_CHARS),
        ),
    )


def wave_progress_row(wave: WaveView, styles: Mapping[str, str]) -> Row:
    if wave.held:  # gate.held: a gate that cannot decide stays closed until the operator does
        status = styled("gate held", "FAILED", styles)
        note = f"the assessment before it failed — g or relay approve {wave.job_id}"
    elif wave.awaiting_approval:
        status, note = styled("gate", "PARKED", styles), "awaiting approval — press g"
    elif wave.done == wave.total:
        status, note = styled("done", "SUCCEEDED", styles), ""
    elif wave.failed:
        status, note = styled(f"{wave.failed} failed", "FAILED", styles), ""
    elif wave.running:
        status, note = styled(f"{wave.running} running", "RUNNING", styles), ""
    elif wave.cancelled:
        status, note = styled(f"{wave.cancelled} cancelled", "CANCELLED", styles), ""
    else:
        status, note = Text("pending", style="dim", end=""), ""
    if wave.cancelled and wave.done + wave.cancelled + wave.dropped == wave.total:
        status = styled(f"done · {wave.cancelled} cancelled", "CANCELLED", styles)
    elif wave.dropped and wave.done + wave.dropped == wave.total:
        status = styled(f"done · {wave.dropped} dropped", "SUCCEEDED", styles)
    progress = f"{bar(wave.done, wave.total)} {wave.done}/{wave.total}"
    return (f"wave:{wave.job_id}:{wave.wave}", (f"├ wave {wave.wave}", status, progress, note))
