"""Dispatch reads the top of the ready queue, in dispatch order, whatever the queue's length."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import Workspace
from sqlalchemy import insert, text, update
from sqlmodel import col

from relay_engine.core.selection import Selected
from relay_engine.loop import dispatch
from relay_engine.store.db import Store
from relay_engine.store.schema import Job, Task


def queued_rows(count: int, now: float, **fields: object) -> list[dict[str, object]]:
    return [
        {
            "key": f"j/{fields.get('prefix', 't')}{i:05d}",
            "job_id": "j",
            "task_id": f"{fields.get('prefix', 't')}{i:05d}",
            "state": "QUEUED",
            "priority": fields.get("priority", "P2"),
            "workstream": fields.get("workstream"),
            "dependencies": [],
            "execution_history": [],
            "created_at": now + i * 1e-3,
            "updated_at": now,
            "resumed_at": fields.get("resumed_at"),
            "provider": fields.get("provider"),
            "parked_at": fields.get("parked_at"),
        }
        for i in range(count)
    ]


def test_a_busy_workstream_at_the_head_of_the_queue_does_not_hide_the_rest(
    workspace: Workspace,
) -> None:
    store = workspace.store()
    now = time.time()
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        session.execute(insert(Task), queued_rows(500, now, priority="P0", workstream="w"))
        session.execute(insert(Task), queued_rows(1, now + 10, prefix="free", priority="P3"))
        running = session.get(Task, "j/t00000")
        assert running is not None
        running.state, running.execution_id = "RUNNING", "e-running"
        session.add(running)
    with store.read() as session:
        view = dispatch.read_queue(session, capacity=2)
    assert [t.key for t in view.running] == ["j/t00000"]
    assert [t.key for t in view.queued] == ["j/free00000"]  # the busy workstream stays unread
    assert [t.key for t in dispatch.choose(view)] == ["j/free00000"]


def test_the_top_of_the_queue_is_read_in_dispatch_order(workspace: Workspace) -> None:
    store = workspace.store()
    now = time.time()
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        session.execute(insert(Task), queued_rows(2000, now, priority="P2"))
        session.execute(insert(Task), queued_rows(3, now + 5, prefix="urgent", priority="P0"))
        session.execute(
            insert(Task),
            queued_rows(
                2, now + 9, prefix="resumed", resumed_at=now, provider="claude", parked_at=now
            ),
        )
    with store.read() as session:
        view = dispatch.read_queue(session, capacity=4)
    assert len(view.queued) < 100  # a page or two, not the whole queue
    chosen = [t.key for t in dispatch.choose(view)]
    assert chosen == ["j/resumed00000", "j/resumed00001", "j/urgent00000", "j/urgent00001"]


def test_a_page_that_cannot_fill_the_slots_reads_on_to_the_next(workspace: Workspace) -> None:
    """A workstream runs one task at a time, so a page of it fills one slot: the read goes
    on past that page's last row (and past what this tick's claims passed over)."""
    store = workspace.store()
    now = time.time()
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        page = dispatch.QUEUE_PAGE_MIN
        session.execute(insert(Task), queued_rows(page + 8, now, priority="P0", workstream="w"))
        session.execute(insert(Task), queued_rows(2, now + 10, prefix="free", priority="P3"))
    with store.read() as session:
        view = dispatch.read_queue(session, capacity=2, exclude=frozenset({"j/free00000"}))
    assert len(view.queued) == page + 8 + 1  # two pages; the passed-over one left unread
    assert [t.key for t in dispatch.choose(view)] == ["j/t00000", "j/free00001"]


def taking_turns(store: Store, plain: Path, queued: int) -> None:
    """Job j in a plain directory with ``queued`` tasks first in the queue, and job k's two
    tasks behind them."""
    plain.mkdir()
    now = time.time()
    with store.write() as session:
        session.add(Job(id="j", title="j", repo_path=str(plain)))
        session.add(Job(id="k", title="k"))
        session.execute(insert(Task), queued_rows(queued, now, priority="P0"))
        behind = queued_rows(2, now + 10, prefix="other", priority="P3")
        session.execute(insert(Task), [row | {"job_id": "k", "key": f"k/{row['task_id']}"}
                                       for row in behind])  # fmt: skip


def test_a_job_taking_turns_in_its_directory_leaves_free_slots_to_the_jobs_behind_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A job whose repo is a plain directory runs one task at a time. With one of its tasks
    running and more of them queued than a page holds, the jobs behind it in the queue
    still get the free slots (its queued tasks once looked like candidates enough, and the
    slots stayed empty)."""
    store = workspace.store()
    taking_turns(store, tmp_path / "plain", 3 * dispatch.QUEUE_PAGE_MIN)
    with store.write() as session:
        running = session.get(Task, "j/t00000")
        assert running is not None
        running.state, running.execution_id = "RUNNING", "e-running"
        running.lock_dir = str((tmp_path / "plain").resolve())
        session.add(running)
    with store.read() as session:
        view = dispatch.read_queue(session, capacity=3)
    assert [t.key for t in dispatch.choose(view)] == ["k/other00000", "k/other00001"]
    assert all(t.job_id == "k" for t in view.queued)  # the waiting turns are not even read


def test_a_job_taking_turns_fills_one_slot_and_the_read_goes_on_for_the_rest(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Nothing running yet: one of the directory's tasks takes a slot, and the pages go on
    past its siblings to fill the others, without reading the rest of them."""
    store = workspace.store()
    page = dispatch.QUEUE_PAGE_MIN
    taking_turns(store, tmp_path / "plain", 10 * page)
    with store.read() as session:
        view = dispatch.read_queue(session, capacity=3)
    assert [t.key for t in dispatch.choose(view)] == ["j/t00000", "k/other00000", "k/other00001"]
    assert len(view.queued) == page + 2  # its first page, then the job behind it


def test_an_engine_counting_its_own_claims_reads_the_fleets_only_for_scoped_work(
    workspace: Workspace,
) -> None:
    """Without fleet caps, an engine's own count is all its slots need: the claimed tasks
    are read only once the queue shows a workstream, which must skip what others hold."""
    store = workspace.store()
    now = time.time()
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        session.execute(insert(Task), queued_rows(6, now, priority="P1"))
    own = Counter({"claude-main": 2})
    kept = dispatch.QueueKept()
    with store.read() as session:
        before = store.stats.statements
        view = dispatch.read_queue(session, capacity=5, engine_id="e1", own=own, kept=kept)
        unscoped_reads = store.stats.statements - before
    assert (view.free, view.owned, view.mine, view.running) == (3, 2, own, [])
    assert [t.key for t in dispatch.choose(view)] == ["j/t00000", "j/t00001", "j/t00002"]
    with store.write() as session:
        session.execute(insert(Task), queued_rows(2, now - 10, prefix="w", workstream="w"))
        held = session.get(Task, "j/w00000")
        assert held is not None
        held.state, held.execution_id, held.lease_owner = "RUNNING", "e-other", "e2"
        session.add(held)
    kept.forget_rows()  # as the engine's next full tick does: another process wrote
    with store.read() as session:
        view = dispatch.read_queue(session, capacity=5, engine_id="e1", own=own, kept=kept)
    assert [t.key for t in view.running] == ["j/w00000"]  # another engine's, read for its scope
    assert kept.scoped  # and the next rounds of this tick read them first
    assert "j/w00001" not in [t.key for t in dispatch.choose(view)]
    with store.read() as session:
        before = store.stats.statements
        full = dispatch.read_queue(session, capacity=5, engine_id="e1")
        assert store.stats.statements - before > unscoped_reads  # the fleet's claims, read
    assert [t.key for t in full.running] == ["j/w00000"]


def test_a_claim_takes_an_alternate_in_place_of_a_pick_claimed_since_the_read(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engines read the same top of the queue: the slot of a first pick another engine
    claimed meanwhile goes to the next candidate in the same claim, not in another round,
    and the candidates it does not need stay free for other engines while it holds its
    locks (PostgreSQL; SQLite has one writer at a time)."""
    store = workspace.store()
    now = time.time()
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        session.execute(insert(Task), queued_rows(3, now))
    with store.read() as session:
        first, second, third = dispatch.read_queue(session, capacity=1).queued[:3]
    with store.write() as session:  # another engine's claim commits after the read
        taken = session.get(Task, first.key)
        assert taken is not None
        taken.execution_id, taken.lease_owner = "e-other", "other"
        session.add(taken)
    lockable: list[bool] = []

    def other_engine_tries_the_third(name: str) -> None:
        if name == "claim-locked" and not store.is_sqlite:
            other = Store.for_workspace(workspace.path, workspace.db_url)
            with other.write() as session:
                probe = text("SELECT key FROM relay_task WHERE key = :k FOR UPDATE SKIP LOCKED")
                lockable.append(bool(session.execute(probe, {"k": third.key}).all()))
            other.dispose()

    monkeypatch.setattr(dispatch, "crash_point", other_engine_tries_the_third)
    wanted = [(row, Selected("sim", "sim", "auto")) for row in (first, second, third)]
    passed_over: set[str] = set()
    claims = dispatch.claim_batch(
        store, wanted, engine_id="me", capacity=1, lease_s=30, now=now,
        passed_over=passed_over, take=1,
    )  # fmt: skip
    assert [claim.task.key for claim in claims] == [second.key]
    assert passed_over == {first.key}  # the third was never looked at: free for the next read
    assert lockable == ([] if store.is_sqlite else [True])


def test_an_unscoped_queue_is_read_pages_ahead_and_the_next_rounds_choose_from_them(
    workspace: Workspace,
) -> None:
    """One read serves a lone engine's next rounds: each chooses where the last claim left
    off, without a statement, until too few rows are left to fill its slots."""
    store = workspace.store()
    with store.write() as session:
        session.add(Job(id="j", title="j"))
        session.execute(insert(Task), queued_rows(100, time.time()))
    kept, own = dispatch.QueueKept(), Counter[str]()

    def round_reads() -> tuple[list[str], int]:
        with store.read() as session:
            before = store.stats.statements
            view = dispatch.read_queue(
                session, capacity=2, engine_id="e1", own=own, kept=kept, pages=dispatch.KEPT_PAGES
            )
            chosen = [t.key for t in dispatch.choose(view)]
            reads = store.stats.statements - before
        with store.write() as session:  # claimed, and the starter tells the kept rows
            claim = update(Task).where(col(Task.key).in_(chosen)).values(execution_id="e")
            session.execute(claim)
        kept.took(chosen)
        return chosen, reads

    first, read = round_reads()
    assert first == ["j/t00000", "j/t00001"] and read > 0
    assert len(kept.rows) == dispatch.QUEUE_PAGE_MIN * dispatch.KEPT_PAGES - 2
    rounds = [round_reads() for _ in range(len(kept.rows) // 2)]
    assert [keys for keys, _ in rounds] == [
        [f"j/t{i:05d}", f"j/t{i + 1:05d}"] for i in range(2, 64, 2)
    ]
    assert [reads for _, reads in rounds] == [0] * 31
    after, read = round_reads()  # the kept rows are spent: the queue is read again
    assert after == ["j/t00064", "j/t00065"] and read > 0
