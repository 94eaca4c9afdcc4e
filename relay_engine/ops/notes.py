"""Pull request notes as rows: recorded in the transaction that decides their subject (a
plan accepted, a wave assessed, a review's verdict, a task's final failure), and handed to
whichever engine writes them to the forge, one writer per note at a time.

The row is the local forge's record of the note as well (``relay status JOB`` shows it);
the github forge makes a comment or a review of it (:mod:`relay_engine.git.forges.github`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlmodel import Session, col, or_, select, update

from relay_engine.contracts.time_format import format_time
from relay_engine.core.writeback import (
    LineComment,
    Note,
    NoteKind,
    Posted,
    failure_key,
    needs_write,
    recovered_note,
    retrying_note,
)
from relay_engine.store.db import Store
from relay_engine.store.schema import PullNote, Task

CLAIM_TTL_S = 120.0
"""A writer that died mid-write frees its notes after this; the body's marker keeps the
next writer from posting a second comment."""


def record_note(session: Session, note: Note, now: float) -> None:
    """Keep the note's latest text; a changed text is written to the forge again."""
    digest = note.digest()
    row = session.get(PullNote, (note.job_id, note.key))
    if row is None:
        row = PullNote(job_id=note.job_id, key=note.key, kind=note.kind, created_at=now)
    elif row.digest == digest:
        return
    row.body = note.body
    row.line_comments = [c.__dict__ for c in note.line_comments]
    row.digest, row.updated_at = digest, now
    session.add(row)


def note_recovery(session: Session, task: Task, now: float) -> None:
    """A task that succeeded on a later attempt: its failure note now says it succeeded."""
    _edit_failure_note(
        session, task, recovered_note(task.job_id, task.key, task.title, task.attempt), now
    )


def note_retry(session: Session, task: Task, now: float) -> None:
    """An operator ran again a task that had failed for good: its failure note says so."""
    note = retrying_note(task.job_id, task.key, task.title, task.attempt + 1, format_time(now))
    _edit_failure_note(session, task, note, now)


def _edit_failure_note(session: Session, task: Task, note: Note, now: float) -> None:
    """Replace the task's failure note, only where it failed for good (the note exists)."""
    if session.get(PullNote, (task.job_id, failure_key(task.key))) is not None:
        record_note(session, note, now)


@dataclass(frozen=True)
class PendingNote:
    """A note claimed for writing: its text and the forge's id of its earlier write."""

    note: Note
    comment_id: str | None


def claim_pending(
    store: Store, job_id: str, publish: Collection[str], owner: str, now: float
) -> list[PendingNote]:
    """The job's notes of published kinds whose text the forge does not hold, claimed.

    Read first, so that a check with nothing to write (the usual one) writes nothing."""
    if not publish:
        return []
    free = or_(col(PullNote.claimed_by).is_(None), col(PullNote.claim_expires_at) < now)
    mine = (PullNote.job_id == job_id, col(PullNote.kind).in_(sorted(publish)), free)
    with store.read() as session:
        keys = [
            row.key
            for row in session.exec(
                select(PullNote).where(*mine).order_by(col(PullNote.created_at))
            )
            if needs_write(row.digest, row.kind, Posted(row.comment_id, row.posted_digest), publish)
        ]
    if not keys:
        return []
    claimed = []
    with store.write() as session:
        for key in keys:
            won = session.exec(
                update(PullNote)
                .where(col(PullNote.job_id) == job_id, col(PullNote.key) == key, free)
                .values(claimed_by=owner, claim_expires_at=now + CLAIM_TTL_S)
            )
            row = session.get(PullNote, (job_id, key)) if won.rowcount == 1 else None
            if row is not None:  # as a writer that finished meanwhile left it
                claimed.append(PendingNote(_note(row), row.comment_id))
    return claimed


def _note(row: PullNote) -> Note:
    kind: NoteKind = row.kind  # type: ignore[assignment]
    comments = tuple(LineComment(**c) for c in row.line_comments or [])
    return Note(row.job_id, row.key, kind, row.body, comments)


def record_written(
    store: Store, pending: PendingNote, comment_id: str, forge: str, now: float
) -> None:
    """The forge holds this text under ``comment_id``; the claim ends."""
    with store.write() as session:
        row = session.get(PullNote, (pending.note.job_id, pending.note.key))
        if row is None:
            return
        row.comment_id, row.forge, row.error = comment_id, forge, None
        row.posted_digest, row.posted_at = pending.note.digest(), now
        row.claimed_by = row.claim_expires_at = None
        session.add(row)


def record_write_failed(store: Store, pending: PendingNote, error: str, now: float) -> None:
    """Say why on the note and free it: the next check tries again."""
    with store.write() as session:
        row = session.get(PullNote, (pending.note.job_id, pending.note.key))
        if row is None:
            return
        row.error, row.updated_at = error[:1000], now
        row.claimed_by = row.claim_expires_at = None
        session.add(row)


@dataclass(frozen=True)
class NoteView:
    """A note as ``relay status JOB`` shows it: its text and where it was written."""

    key: str
    kind: str
    body: str
    where: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


def read_notes(session: Session, job_id: str) -> list[NoteView]:
    rows = session.exec(
        select(PullNote).where(PullNote.job_id == job_id).order_by(col(PullNote.created_at))
    ).all()
    return [NoteView(row.key, row.kind, row.body, _where(row)) for row in rows]


def _where(row: PullNote) -> str:
    if row.comment_id is None:
        return f"not written yet: {row.error}" if row.error else "relay's record"
    stale = "" if row.posted_digest == row.digest else " (an update is pending)"
    return f"{row.forge} comment {row.comment_id}{stale}"
