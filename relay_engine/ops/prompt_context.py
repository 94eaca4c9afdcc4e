"""What goes into a task's prompt, read from the database and the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from sqlmodel import Session, col, select

from relay_engine.agents.adapters import MEMORY_TOOL_PROVIDERS
from relay_engine.contracts import troubleshooter
from relay_engine.contracts.keys import task_key
from relay_engine.contracts.prompts import (
    MEMORY_NOTES_IN_PROMPT,
    DependencyResult,
    PromptParts,
    answer_contract,
    overlay_names,
)
from relay_engine.ops import troubleshoot
from relay_engine.store.schema import Job, Memory, Task
from relay_engine.store.task_rows import tasks_by_key


def prompt_context(
    session: Session, workspace: Path, task: Task, job: Job | None, provider: str
) -> PromptParts:
    deps = tasks_by_key(session, [task_key(task.job_id, d) for d in task.dependencies])
    results = [
        DependencyResult(d.task_id, d.title, d.result_summary)
        for d in sorted(deps.values(), key=lambda t: t.task_id)
    ]
    notes = _memory_notes(session, task)
    names = overlay_names(
        repo=job.repo_path if job else None, provider=provider, role=task.role, kind=task.kind
    )
    overlays = _overlays(workspace / ".relay" / "prompts", names)
    return PromptParts(
        task_key=task.key,
        title=task.title,
        input=task.input,
        role=task.role,
        kind=task.kind,
        objective=job.objective if job else "",
        dependency_results=results,
        memory_notes=notes,
        overlays=overlays,
        attempt=task.attempt,
        operator_notes=tuple(task.operator_notes or ()),
        handed_back=task.keep_work,
        memory_tools=provider in MEMORY_TOOL_PROVIDERS,
        previous_error=task.error,
        guidance=task.guidance,
        briefing=troubleshoot.briefing(session, task, job)
        if task.kind == troubleshooter.KIND
        else "",
        contract=answer_contract(task.kind),
    )


def _memory_notes(session: Session, task: Task) -> list[str]:
    """The workstream's latest notes, oldest first; a task without a workstream has none."""
    if not task.workstream:
        return []
    query = (
        select(Memory.note)
        .where(Memory.job_id == task.job_id, Memory.workstream == task.workstream)
        .order_by(col(Memory.id).desc())
        .limit(MEMORY_NOTES_IN_PROMPT)
    )
    return list(session.exec(query))[::-1]


def _overlays(folder: Path, names: list[str]) -> list[str]:
    """The texts of those of ``names`` the overlay folder holds, in that order: one listing
    of the folder per start (most workspaces have none), not a look per name."""
    try:
        present = set(os.listdir(folder))
    except OSError:
        return []
    paths = [folder / name for name in names if name in present]
    return [path.read_text(encoding="utf-8", errors="replace") for path in paths if path.is_file()]
