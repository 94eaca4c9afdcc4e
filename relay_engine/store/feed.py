"""Following the change feed without skipping an event that commits late.

Consoles, notifications and engines follow the feed with a mark: "every event up to here
is read". An id alone cannot be that mark on PostgreSQL: a transaction takes its event's
id when it inserts the row and shows the row when it commits, so with two engines writing
at once an event with a smaller id can appear after a reader passed its id, and a webhook
would never hear of it. A :class:`FeedMark` therefore keeps, with the highest id read, the
ids below it that were missing when it passed them (the *gaps*), and every read asks for
those again, until they show or :data:`GAP_WAIT_S` says their transaction will not commit
(it rolled back: sequences do not give ids back). On SQLite, whose writers are serialised,
ids are commit order and no gap stays open.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, or_
from sqlmodel import Session, col, select

from relay_engine.store.schema import Event

GAP_WAIT_S = 60.0
"""How long a reader keeps asking for a missing id. Writing transactions are short and an
idle one is ended by the server within seconds (``store.db.PG_IDLE_IN_TRANSACTION_MS``), so
an id missing this long belongs to a transaction that rolled back."""

MAX_GAPS = 1000
"""The most missing ids a mark keeps (the newest): more are not transactions in flight."""

PAGE = 1000
"""How many events a reader takes at once, unless it says."""

RECENT_IDS = 256
"""How far below the newest id :func:`end` looks for ids still in flight."""


@dataclass(frozen=True)
class FeedMark:
    """Every event up to ``top`` is read, except the ``gaps``: (id, when first missed)."""

    top: int = 0
    gaps: tuple[tuple[int, float], ...] = ()

    def waiting(self, now: float) -> dict[int, float]:
        """The gaps still worth asking for."""
        return {gap: since for gap, since in self.gaps if now - since < GAP_WAIT_S}


START = FeedMark()
"""Before the first event."""


def read_after(
    session: Session, mark: FeedMark, now: float, limit: int = PAGE
) -> tuple[list[Event], FeedMark]:
    """Up to ``limit`` events beyond ``mark`` (late ones first), and the mark to read on from."""
    query = select(Event).where(beyond(mark, now)).order_by(col(Event.id)).limit(limit)
    events = list(session.exec(query))
    return events, passed(mark, [e.id or 0 for e in events], now)


def read_last(session: Session, count: int, now: float) -> tuple[list[Event], FeedMark]:
    """The newest ``count`` events, oldest first, and the mark to follow on from."""
    newest = select(Event).order_by(col(Event.id).desc()).limit(max(count, RECENT_IDS))
    rows = list(session.exec(newest))
    return list(reversed(rows[:count])), _mark_over([e.id or 0 for e in rows], now)


def end(session: Session, now: float) -> FeedMark:
    """A mark past every event visible now, whose gaps are the recent ids not visible yet:
    where a reader that wants only what happens from now on starts."""
    newest = select(Event.id).order_by(col(Event.id).desc()).limit(RECENT_IDS)
    return _mark_over([int(i or 0) for i in session.exec(newest)], now)


def _mark_over(newest_first: list[int], now: float) -> FeedMark:
    """The mark past the newest ids read (at least :data:`RECENT_IDS` of them, or the
    whole feed): the ids missing among them are its gaps."""
    below = newest_first[-1] - 1 if len(newest_first) >= RECENT_IDS else 0
    return passed(FeedMark(top=below), newest_first, now)


def news_since(session: Session, mark: FeedMark, now: float) -> bool:
    """Whether any event beyond ``mark`` is visible."""
    query = select(Event.id).where(beyond(mark, now)).limit(1)
    return session.exec(query).first() is not None


def beyond(mark: FeedMark, now: float) -> ColumnElement[bool]:
    """The events a reader at ``mark`` has not read: newer ones and late ones."""
    newer = col(Event.id) > mark.top
    waiting = mark.waiting(now)
    return or_(newer, col(Event.id).in_(list(waiting))) if waiting else newer


def passed(mark: FeedMark, seen: list[int], now: float) -> FeedMark:
    """The mark after reading ``seen``, the ids of the events :func:`beyond` selected up to
    the newest read: every id between the old top and that one that did not come is a
    transaction not committed yet."""
    waiting = mark.waiting(now)
    found = set(seen)
    top = max([mark.top, *seen])
    gaps = {gap: since for gap, since in waiting.items() if gap not in found}
    floor = max(mark.top, top - MAX_GAPS)
    gaps.update((gap, now) for gap in range(floor + 1, top) if gap not in found)
    kept = sorted(gaps.items())[-MAX_GAPS:]
    return FeedMark(top, tuple(kept))
