"""What an attempt that failed before its agent ran leaves behind: a row and its artifacts.

No agent could take the task, its worktree could not be made, its prompt could not be
assembled, or its process could not start: each still gets an execution row (outcome
``failed`` or ``unavailable``, the error, no exit code) and a folder with the files a run
has, so far as they exist: ``prompt.md`` once the prompt was assembled, and ``error.txt``
saying what failed at which stage. ``relay status`` and the console's detail screen point
at that folder, and a troubleshooter's prompt lists it.

The texts and the row are built by pure functions; writing the files is the only I/O, and
a failure to write them (a full disk) is logged, never raised: the failure itself must
still be recorded.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

from relay_engine.agents.runner import write_artifact_text
from relay_engine.store.schema import Execution, Task

ERROR_FILE = "error.txt"
PROMPT_FILE = "prompt.md"
log = logging.getLogger(__name__)


class Stage:
    """How far a start got before it failed; named in error.txt."""

    SELECTION = "agent selection"
    AGENT = "agent check"
    PROMPT = "prompt assembly"
    WORKTREE = "worktree"
    LAUNCH = "launch"


@dataclass(frozen=True)
class StartFailure:
    stage: str
    message: str


def error_text(task: Task, agent: str | None, failure: StartFailure) -> str:
    """error.txt: which attempt failed where, and git's or the OS's own words."""
    return (
        f"task: {task.key} (attempt {task.attempt}/{task.max_attempts})\n"
        f"agent: {agent or 'none'}\n"
        f"failed at: {failure.stage}, before the agent ran\n"
        f"error: {failure.message}\n"
    )


def write_artifacts(directory: Path, error: str, prompt: str | None = None) -> bool:
    """Write error.txt (and prompt.md when it was assembled but not yet written)."""
    try:
        if prompt is not None and not (directory / PROMPT_FILE).exists():
            write_artifact_text(directory, PROMPT_FILE, prompt)
        write_artifact_text(directory, ERROR_FILE, error)
    except OSError as problem:
        log.warning("could not write the artifacts of a failed start in %s: %s", directory, problem)
        return False
    return True


def unclaimed_execution(
    task: Task, *, engine_id: str, artifacts: Path, error: str, now: float
) -> Execution:
    """The row of an attempt that never got a claim (no agent can take the task)."""
    execution_id = uuid.uuid4().hex
    return Execution(
        id=execution_id,
        job_id=task.job_id,
        task_key=task.key,
        engine_id=engine_id,
        attempt=task.attempt,
        started_at=now,
        ended_at=now,
        outcome="failed",
        error=error,
        artifact_dir=str(artifacts / execution_id),
    )
