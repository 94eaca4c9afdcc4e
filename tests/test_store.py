"""The store under concurrency: rows two engines create at the same moment."""

from __future__ import annotations

import threading

from helpers import Workspace

from relay_engine.model import AgentRecord, ProviderLimit
from relay_engine.store import ensure_row


def test_two_engines_creating_the_same_row_at_once_do_not_collide(workspace: Workspace) -> None:
    store = workspace.store()
    other_done = threading.Event()
    errors: list[BaseException] = []

    def other_engine() -> None:
        try:
            with store.write() as session:
                ensure_row(session, ProviderLimit, provider="claude")
                ensure_row(session, AgentRecord, id="claude-a")
        except BaseException as error:
            errors.append(error)
        finally:
            other_done.set()

    with store.write() as session:
        ensure_row(session, ProviderLimit, provider="claude")
        ensure_row(session, AgentRecord, id="claude-a")
        thread = threading.Thread(target=other_engine)
        thread.start()
        other_done.wait(0.5)  # the other engine is now blocked on (or racing) our rows
    thread.join(10)

    assert errors == []
    with store.read() as session:
        assert session.get(ProviderLimit, "claude") is not None
        assert session.get(AgentRecord, "claude-a") is not None
