"""Following the change feed: on PostgreSQL an event's id is taken at insert and shown at
commit, so the event with the smaller id can appear last. Every reader of the feed (the
notifier's shared cursor, consoles, ``relay events``) must still get it, once."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from helpers import Workspace
from sqlmodel import Session

from relay_engine.loop.notify import Destination, take_batch
from relay_engine.store import feed
from relay_engine.store.db import Store
from relay_engine.store.events import EventKind, record_event

pytestmark = pytest.mark.postgres  # SQLite serialises its writers: its ids are commit order


@pytest.fixture
def db_url(pg_url: str) -> str:
    """The workspace on PostgreSQL only."""
    return pg_url


def _event(session: Session, message: str) -> None:
    record_event(session, EventKind.NOTIFY_FAILED, message, now=time.time())
    session.flush()  # the id is taken now, the row shown at commit


def _commit_out_of_order(workspace: Workspace, read_between: Callable[[Store], None]) -> None:
    """Event "first" takes its id, "second" takes the next and commits, then "first"
    commits; ``read_between`` runs while "first" is still open."""
    store = workspace.store()
    writer_a = workspace.store()
    writer_b = workspace.store()
    with writer_a.write() as first:
        _event(first, "first")
        with writer_b.write() as second:
            _event(second, "second")
        read_between(store)


def test_a_notifier_never_steps_past_an_event_whose_transaction_is_open(
    workspace: Workspace,
) -> None:
    store = workspace.store()
    hook = Destination("webhook", "http://127.0.0.1:9/hook")
    with store.write() as session:
        assert take_batch(session, hook, time.time()) == []  # the cursor starts at the end
    sent: list[str] = []

    def notifier_runs(reader: Store) -> None:
        with reader.write() as session:
            sent.extend(e.message for e in take_batch(session, hook, time.time()))

    _commit_out_of_order(workspace, notifier_runs)
    notifier_runs(store)
    notifier_runs(store)

    assert sent == ["second", "first"]  # each once, as they committed


def test_a_console_following_the_feed_sees_every_event_once(
    workspace: Workspace,
) -> None:
    store = workspace.store()
    with store.read() as session:
        mark = feed.end(session, time.time())
    seen: list[str] = []

    def follow(reader: Store) -> None:
        nonlocal mark
        events, mark = reader.events_after(mark)
        seen.extend(e.message for e in events)

    _commit_out_of_order(workspace, follow)
    with store.read() as session:
        assert feed.news_since(session, mark, time.time())  # "first" shows, below the mark
    follow(store)
    follow(store)

    assert seen == ["second", "first"]  # as they committed


def test_an_id_whose_transaction_rolled_back_is_given_up(workspace: Workspace) -> None:
    store = workspace.store()
    with store.read() as session:
        mark = feed.end(session, time.time())
    try:
        with store.write() as session:
            _event(session, "never")
            raise RuntimeError("the transaction fails")
    except RuntimeError:
        pass
    with store.write() as session:
        _event(session, "kept")
    events, mark = store.events_after(mark)
    assert [e.message for e in events] == ["kept"]
    assert len(mark.gaps) == 1  # asked for again while it may still commit
    with store.read() as session:
        assert not feed.news_since(session, mark, time.time())
        later = time.time() + feed.GAP_WAIT_S
        assert feed.read_after(session, mark, later)[1].gaps == ()
