"""Troubleshooter tasks: a failed task gets one agent to look at why before the job gives up.

When a task has used its attempts (and its job allows it, ``troubleshoot = true``), a
``troubleshoot`` task is queued in the same transaction, so the job cannot settle as
FAILED while someone is still looking. Its prompt carries the failure record (input,
errors, stderr tails, artifact paths, the diff left on the task's branch) and it answers
with JSON, the way planners do: ``{"verdict": "retry" | "replan" | "give_up",
"guidance": "…", "reason": "…"}``. ``retry`` gives the task fresh attempts with the
guidance in its next prompt, ``replan`` starts a planner round with it, ``give_up`` leaves
the task FAILED with the reason. One troubleshooter per failure chain; a troubleshooter
that fails, or answers nonsense, means give up: nothing here can loop.
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, col, select

from relay_engine.contracts.troubleshooter import KIND, ROLE, Verdict, parse_verdict
from relay_engine.core.states import TaskState
from relay_engine.core.writeback import failure_note
from relay_engine.git.diffs import task_diff
from relay_engine.ops.notes import record_note
from relay_engine.ops.plans import replan
from relay_engine.ops.tasks import retry_task
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.read_model.agents import known_agents
from relay_engine.store.schema import Execution, Job, Task

EXECUTIONS_SHOWN = 3
STDERR_TAIL_BYTES = 2000
DIFF_CHARS = 20_000


def troubleshooter_key(task: Task) -> str:
    return f"{task.job_id}/{task.task_id}.{KIND}"


def request(session: Session, task: Task, now: float) -> Task | None:
    """Queue the one troubleshooter of a task that just failed for good, if its job wants it
    and some engine has an agent that can take it (else the failure goes straight to the
    operator: a troubleshooter nobody can run would only fail too)."""
    if task.kind == KIND or task.troubleshoots:
        return None
    job = session.get(Job, task.job_id)
    if job is None or not job.troubleshoot or not _anyone_troubleshoots(session):
        return None
    task.troubleshoots += 1
    session.add(task)
    helper = Task(
        key=troubleshooter_key(task),
        job_id=task.job_id,
        task_id=f"{task.task_id}.{KIND}",
        kind=KIND,
        title=f"troubleshoot {task.task_id}",
        input=f"Task {task.key} ({task.title}) failed after {task.attempt} attempts. "
        "Find out why from the failure record below, then say what relay should do.",
        role=ROLE,
        priority=task.priority,
        state=TaskState.QUEUED,
        max_attempts=1,
        wave=task.wave,
        plan_id=task.plan_id,
        parent_key=task.key,
        sim=(task.sim or {}).get("troubleshooter"),
        created_at=now,
        updated_at=now,
    )
    session.add(helper)
    record_event(
        session,
        EventKind.TASK_TROUBLESHOOTING,
        f"{task.key} failed: {helper.task_id} looks into it before the job gives up",
        now=now,
        job_id=task.job_id,
        task_key=helper.key,
        data={"failed": task.key},
    )
    return helper


def conclude(session: Session, helper: Task, now: float) -> None:
    """Act on a finished troubleshooter (SUCCEEDED with a verdict, or FAILED)."""
    parent = session.get(Task, helper.parent_key) if helper.parent_key else None
    if parent is None or parent.state != TaskState.FAILED:
        return  # the operator acted first (retried or cancelled it)
    if helper.state == TaskState.FAILED:
        _give_up(session, parent, f"its troubleshooter failed: {helper.error}", now)
        return
    verdict = parse_verdict(helper.result)
    if isinstance(verdict, str):
        _give_up(session, parent, f"its troubleshooter's answer was unusable: {verdict}", now)
    elif verdict.verdict == "retry":
        _retry(session, parent, verdict, now)
    elif verdict.verdict == "replan":
        job = session.get(Job, parent.job_id)
        if job is not None:
            replan(session, job, verdict.guidance, now, trigger=KIND)
        _note(
            session,
            parent,
            EventKind.TASK_TROUBLESHOT,
            f"replanning the job: {verdict.reason}",
            now,
        )
    else:
        _give_up(session, parent, f"troubleshooter gave up: {verdict.reason or 'no reason'}", now)


def _retry(session: Session, parent: Task, verdict: Verdict, now: float) -> None:
    fresh_attempts = parent.max_attempts
    retry_task(session, parent, now)
    parent.max_attempts = parent.attempt + fresh_attempts
    parent.guidance = verdict.guidance or None
    session.add(parent)
    why = f": {verdict.reason}" if verdict.reason else ""
    _note(
        session,
        parent,
        EventKind.TASK_TROUBLESHOT,
        f"retried with the troubleshooter's guidance{why}",
        now,
    )


def record_failure(session: Session, task: Task, verdict: str | None, now: float) -> None:
    """The pull request note of a task that failed for good (``verdict``: what its
    troubleshooter said, None when none looked into it)."""
    note = failure_note(task.job_id, task.key, task.title, task.attempt, task.error, verdict)
    record_note(session, note, now)


def _anyone_troubleshoots(session: Session) -> bool:
    """An enabled agent with the troubleshooter role, on any engine of the database."""
    return any(a.enabled and ROLE in (a.roles or ()) for a in known_agents(session))


def _give_up(session: Session, parent: Task, why: str, now: float) -> None:
    record_failure(session, parent, why, now)
    parent.error = f"{parent.error or 'failed'} ({why})"[:2000]
    parent.updated_at = now
    session.add(parent)
    _note(session, parent, EventKind.TASK_GAVE_UP, why, now, level="error")


def _note(
    session: Session, task: Task, kind: EventKind, text: str, now: float, level: str = "info"
) -> None:
    record_event(
        session,
        kind,
        f"{task.key} {text}"[:500],
        now=now,
        job_id=task.job_id,
        task_key=task.key,
        level=level,
    )


# --- the failure record in the troubleshooter's prompt ------------------------------------


def briefing(session: Session, helper: Task, job: Job | None) -> str:
    """What the troubleshooter reads: the failed task, its last runs, what it left behind."""
    parent = session.get(Task, helper.parent_key) if helper.parent_key else None
    if parent is None:
        return ""
    sections = [f"## The failed task: {parent.key}\n{parent.input or parent.title}"]
    sections.append(f"Last error: {parent.error or 'none recorded'}")
    runs = session.exec(
        select(Execution)
        .where(Execution.task_key == parent.key)
        .order_by(col(Execution.started_at).desc())
        .limit(EXECUTIONS_SHOWN)
    ).all()
    sections += [run_record(run) for run in runs]
    diff = task_diff(job.repo_path, job.id, parent.task_id) if job else None
    if diff is not None and diff.text:
        cut = "\n(diff cut short)" if diff.truncated or len(diff.text) > DIFF_CHARS else ""
        sections.append(
            f"## What it left on {diff.branch}\n```diff\n{diff.text[:DIFF_CHARS]}\n```{cut}"
        )
    return "\n\n".join(sections)


def run_record(run: Execution) -> str:
    lines = [
        f"### Attempt {run.attempt} on {run.agent} ({run.provider}): {run.outcome or 'unknown'}",
        f"- error: {run.error or 'none'}",
        f"- exit code: {run.exit_code}",
    ]
    if run.artifact_dir:
        folder = Path(run.artifact_dir)
        files = sorted(p.name for p in folder.glob("*") if p.suffix in (".md", ".txt"))
        lines.append(f"- artifacts: {folder} ({', '.join(files) or 'none written'})")
        for name in ("error.txt", "stderr.txt"):  # why a start failed; what the agent said
            tail = _tail(folder / name)
            if tail:
                lines.append(f"- {name} (last lines):\n```\n{tail}\n```")
    return "\n".join(lines)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - STDERR_TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
