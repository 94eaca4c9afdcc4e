"""The fixed sample's waits: a job BLOCKED on a task that failed for good (and a task the
operator dropped), a wave gate held shut by an assessment that failed (``gate.held``), a
task swapped to another agent off a limited one (``task.swapped``), and each account's
quota windows (how full, when they reset) for the Providers pane's gauges.

Rows only; :func:`relay_tui.demo.sample.write_sample` stores them. Times are offsets from
:data:`NOW`, so snapshots stay the same pixels.
"""

from __future__ import annotations

from typing import Any

from relay_engine.store.schema import Event, Job, QuotaWindow, Task
from relay_tui.demo.sample_jobs import NOW

I18N_BLOCKED = "task i18n/extract failed; relay retry i18n/extract, or relay drop i18n/extract"
ASSESSOR_ERROR = "assessor answer rejected: not a JSON object"


def _task(job: str, task_id: str, title: str, index: int, **fields: Any) -> Task:
    fields.setdefault("input", f"{title}.")
    return Task(
        key=f"{job}/{task_id}", job_id=job, task_id=task_id, title=title,
        created_at=NOW - 1500 + index, updated_at=NOW - 30, **fields,
    )  # fmt: skip


def jobs() -> list[Job]:
    return [
        Job(id="i18n", title="Translations", state="BLOCKED", blocked_by=I18N_BLOCKED,
            created_at=NOW - 1500, objective="Ship the German and Arabic translations."),
        Job(id="mobile", title="Mobile layout", mode="autonomous", wave_gate="assess",
            approved_wave=1, created_at=NOW - 1400,
            objective="A layout that works on phones."),
    ]  # fmt: skip


def tasks() -> list[Task]:
    codex = {"agent": "sim-codex", "provider": "codex"}
    return [
        _task("i18n", "extract", "Extract the strings", 0, state="FAILED", attempt=3, **codex,
              started_at=NOW - 700, finished_at=NOW - 640,
              error="exit 2: msgfmt: locale/de.po: no such file"),
        _task("i18n", "rtl", "Right-to-left styles", 1, state="DROPPED", finished_at=NOW - 600),
        _task("i18n", "translate", "Translate to German", 2, wave=2, state="DRAFT",
              blocked_by="extract", dependencies=["extract"]),
        _task("mobile", "layout", "Responsive grid", 10, state="SUCCEEDED", attempt=1, **codex,
              started_at=NOW - 1100, finished_at=NOW - 900, result_summary="grid at 3 breakpoints"),
        _task("mobile", "assess-1", "assess-1", 11, kind="assess", role="assessor",
              state="FAILED", attempt=2, max_attempts=2, agent="sim-claude", provider="claude",
              started_at=NOW - 880, finished_at=NOW - 850, error=ASSESSOR_ERROR),
        _task("mobile", "screens", "Screens for phones", 12, wave=2, state="DRAFT",
              dependencies=["layout"]),
        _task("api-keys", "notify", "Tell the key holders", 13, state="QUEUED", attempt=0,
              dependencies=[]),
    ]  # fmt: skip


def quota() -> list[QuotaWindow]:
    """claude's five-hour window over its 95% watermark (the limit the Providers pane shows),
    its week at 41%, codex's five hours at 62%."""
    return [
        QuotaWindow(key="claude", window="five_hour", provider="claude", status="rejected",
                    utilization=0.97, resets_at=NOW + 1380, window_minutes=300,
                    agent="sim-claude", observed_at=NOW - 300),
        QuotaWindow(key="claude", window="seven_day", provider="claude",
                    status="allowed_warning", utilization=0.41, resets_at=NOW + 3 * 86400,
                    window_minutes=10080, threshold=0.4, agent="sim-claude",
                    observed_at=NOW - 300),
        QuotaWindow(key="codex", window="primary", provider="codex", status="allowed",
                    utilization=0.62, resets_at=NOW + 5400, window_minutes=300,
                    agent="sim-codex", observed_at=NOW - 60),
    ]  # fmt: skip


def events() -> list[Event]:
    return [
        Event(at=NOW - 3, job_id="api-keys", task_key="api-keys/notify", kind="task.swapped",
              level="warning", message="api-keys/notify moved off sim-claude, claude limited: "
              "You've hit your limit · resets 9:23am (UTC); another agent takes it"),
        Event(at=NOW - 2, job_id="mobile", task_key="mobile/assess-1", kind="gate.held",
              level="warning", message=f"job mobile: wave 2 held: the assessment of wave 1 failed "
              f"({ASSESSOR_ERROR}); relay approve mobile lets it run, relay replan mobile "
              "revises the plan"),
    ]  # fmt: skip


def rows() -> list[Any]:
    return [*jobs(), *tasks(), *quota(), *events()]
