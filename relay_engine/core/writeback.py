"""What relay writes back on a job's pull request: each round's plan, each wave's
assessment, each final review with its findings, a task's final failure with the
troubleshooter's verdict.

Each note has a key that stays the same while its subject does (``plan:2``,
``review:1``, ``failure:job/build``), so a second write of the same item edits the comment
that the first one made instead of adding another; the key is also written into the body
as a hidden marker, so a comment posted by an engine that died before it could record the
comment's id is found again rather than posted twice. A finding that names a file and a
line also becomes a line comment of the review.

Pure: the shell gathers the facts and performs the writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

NoteKind = Literal["plan", "assessment", "review", "failure"]
MAX_BODY_CHARS = 60_000  # GitHub refuses comments over 65536 characters


@dataclass(frozen=True)
class LineComment:
    """A finding pinned to one line of the pull request's diff."""

    path: str
    line: int
    body: str


@dataclass(frozen=True)
class Note:
    """One item relay writes back, as text; ``key`` is its identity on the forge."""

    job_id: str
    key: str
    kind: NoteKind
    body: str
    line_comments: tuple[LineComment, ...] = ()

    def digest(self) -> str:
        """Equal for notes that read the same: a write happens only when this changes."""
        comments = [(c.path, c.line, c.body) for c in self.line_comments]
        payload = json.dumps([self.body, comments], sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def marker(key: str) -> str:
    """The hidden line that names a note in its own body (GitHub renders it as nothing)."""
    return f"<!-- relay:{key} -->"


def marked_body(note: Note) -> str:
    """The note's body as posted: capped to what a forge takes, and marked with its key."""
    body = note.body
    if len(body) > MAX_BODY_CHARS:
        body = body[:MAX_BODY_CHARS] + "\n\n(cut short: the rest is in `relay status`)"
    return f"{body}\n\n{marker(note.key)}"


def plan_note(
    job_id: str,
    round_number: int,
    trigger: str,
    objective_status: str | None,
    assessment: str | None,
    tasks: Sequence[tuple[str, str]],
) -> Note:
    """A planner round that was accepted: why it ran, what it thinks, the tasks it made."""
    lines = [f"### relay: plan, round {round_number} ({trigger})", ""]
    if objective_status:
        lines.append(f"Objective: **{objective_status.replace('_', ' ')}**.")
    if assessment:
        lines += ["", assessment.strip()]
    if tasks:
        lines += ["", "| task | title |", "|---|---|"]
        lines += [f"| `{task_id}` | {_cell(title)} |" for task_id, title in tasks]
    else:
        lines += ["", "No new tasks."]
    return Note(job_id, f"plan:{round_number}", "plan", "\n".join(lines))


def assessment_note(
    job_id: str, task_key: str, wave: int, decision: str, summary: str, findings: Sequence[str]
) -> Note:
    """An assessor's decision on a finished wave: go on with the plan, or replan."""
    verdict = "continue with the plan" if decision == "continue" else "replan"
    lines = [f"### relay: assessment of wave {wave}: {verdict}", ""]
    if summary:
        lines.append(summary.strip())
    lines += [f"- {finding}" for finding in findings]
    return Note(job_id, f"assessment:{task_key}", "assessment", "\n".join(lines))


def review_note(
    job_id: str,
    number: int,
    verdict: str,
    summary: str,
    findings: Sequence[Mapping[str, Any]],
) -> Note:
    """A final review: its verdict and summary as the review's body, every finding listed,
    and those naming a file and a line also as line comments."""
    said = {"approve": "approves", "changes": "asks for changes"}.get(verdict, verdict)
    lines = [f"### relay: review {number} {said}", ""]
    if summary:
        lines.append(summary.strip())
    comments = []
    for finding in findings:
        where = _where(finding)
        severity = str(finding.get("severity") or "minor")
        text = str(finding.get("text") or "").strip()
        lines.append(f"- **{severity}**{f' `{where}`' if where else ''}: {text}")
        line = finding.get("line")
        if finding.get("file") and isinstance(line, int) and line > 0:
            comments.append(LineComment(str(finding["file"]), line, f"**{severity}**: {text}"))
    return Note(job_id, f"review:{number}", "review", "\n".join(lines), tuple(comments))


def failure_note(
    job_id: str,
    task_key: str,
    title: str,
    attempts: int,
    error: str | None,
    verdict: str | None,
) -> Note:
    """A task that failed for good: what it was, why, and what its troubleshooter said."""
    lines = [f"### relay: `{task_key}` failed for good", ""]
    lines.append(f"{title} failed after {attempts} attempt{'s' if attempts != 1 else ''}.")
    if error:
        lines += ["", "```", error.strip()[:4000], "```"]
    if verdict:
        lines += ["", f"Troubleshooter: {verdict.strip()}"]
    else:
        lines += ["", "No troubleshooter looked into it."]
    lines += ["", f"Ways out: `relay retry {task_key}`, `relay replan {job_id}`."]
    return Note(job_id, failure_key(task_key), "failure", "\n".join(lines))


def failure_key(task_key: str) -> str:
    return f"failure:{task_key}"


def retrying_note(job_id: str, task_key: str, title: str, attempt: int, when: str) -> Note:
    """The same note while the operator's retry runs: the comment no longer reads as the
    task's last word (it is edited again when the retry ends)."""
    lines = [f"### relay: `{task_key}` is being retried", ""]
    lines.append(f"{title} had failed for good; retried at {when}, attempt {attempt} runs now.")
    lines += ["", "This comment says how it ends."]
    return Note(job_id, failure_key(task_key), "failure", "\n".join(lines))


def recovered_note(job_id: str, task_key: str, title: str, attempt: int) -> Note:
    """The same note once the task ran again and succeeded: the comment that said it had
    failed for good is edited to say so, rather than left standing on the pull request."""
    lines = [f"### relay: `{task_key}` succeeded after all", ""]
    lines.append(f"{title} had failed for good; run again, it succeeded on attempt {attempt}.")
    return Note(job_id, failure_key(task_key), "failure", "\n".join(lines))


@dataclass(frozen=True)
class Posted:
    """What the forge holds of a note: its comment (or review) id and the digest written."""

    comment_id: str | None
    digest: str | None


def needs_write(note_digest: str, kind: str, posted: Posted, publish: Collection[str]) -> bool:
    """A note is written when its kind is published and the forge does not hold this text."""
    return kind in publish and posted.digest != note_digest


def _where(finding: Mapping[str, Any]) -> str:
    path = str(finding.get("file") or "")
    line = finding.get("line")
    return f"{path}:{line}" if path and line else path


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
