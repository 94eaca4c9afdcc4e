"""What one exit write costs as the engine sends it, through Core and through the driver.

    .venv/bin/python bench/db_layers.py [--exits 2] [--repeat 300] [--db postgresql://…]

bench/batch_cost.py finds a tick's own cost about twice a task's, and a profile of the
engine thread at two slots finds most of it in the database layer's Python (SQLAlchemy and
psycopg), not in relay's code nor in the server. This bench measures that layer alone: the
statements an engine's exit write sends for ``--exits`` finished tasks (lock and read their
whole rows, end their executions, move them to SUCCEEDED, append one event each), sent
three ways in one transaction each, side by side, on a SQLite file (and on the PostgreSQL
server ``--db`` names, with RELAY_BENCH_PG_URL as its default):

- ``engine``: as the engine sends them today (``fenced_tasks`` through the ORM,
  ``plain_rows.update_by_id``, and ``move_task`` inside ``events_together``, whose events
  and task changes are one statement on PostgreSQL);
- ``core``: the same statements as SQLAlchemy Core, on the session's connection;
- ``driver``: the same SQL through the DBAPI cursor (sqlite3, psycopg) of the same pool.

Each transaction is rolled back, so every repetition finds the same rows. Prints the thread
CPU per transaction (median of five blocks) and the ratios to the driver's. Never asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batch_cost import fresh_url  # its database of a run's own, SQLite or PostgreSQL
from sqlalchemy import bindparam

from relay_engine.core.states import TaskState
from relay_engine.ops.completion import fenced_tasks
from relay_engine.store.db import Store, table_of
from relay_engine.store.events import EventKind, events_together
from relay_engine.store.plain_rows import update_by_id
from relay_engine.store.schema import Event, Execution, Task
from relay_engine.store.task_rows import move_task

JOB = "layers"


def seed(store: Store, count: int) -> dict[str, str]:
    """``count`` RUNNING tasks, each with its execution: key -> execution id."""
    claims = {f"{JOB}/t{i}": f"exec-{i}" for i in range(count)}
    with store.write() as session:
        for i, (key, execution_id) in enumerate(claims.items()):
            session.add(
                Task(key=key, job_id=JOB, task_id=f"t{i}", state=TaskState.RUNNING,
                     execution_id=execution_id, lease_owner="bench", attempt=1)
            )  # fmt: skip
            session.add(Execution(id=execution_id, job_id=JOB, task_key=key, started_at=1.0))
    return claims


def engine_exit(store: Store, claims: dict[str, str]) -> None:
    with store.write() as session:
        owned = fenced_tasks(session, claims)
        rows = [{"id": e, "ended_at": 2.0, "exit_code": 0, "outcome": "SUCCEEDED"} for e in claims.values()]  # fmt: skip
        update_by_id(session, Execution, rows)
        with events_together(session, changes_of=Task):  # as the reaper does
            for task in owned.values():
                move_task(session, task, TaskState.SUCCEEDED, now=2.0, kind=EventKind.TASK_SUCCEEDED,
                          message=f"{task.key} succeeded", finished_at=2.0)  # fmt: skip
        session.flush()
        session.rollback()


def core_exit(store: Store, claims: dict[str, str]) -> None:
    tasks, executions, events = table_of(Task), table_of(Execution), table_of(Event)
    with store.write() as session:
        connection = session.connection()
        locked = tasks.select().where(tasks.c.key.in_(bindparam("keys", expanding=True)))
        if not store.is_sqlite:
            locked = locked.with_for_update()
        connection.execute(locked, {"keys": list(claims)}).all()
        ended = executions.update().where(executions.c.id == bindparam("row_id"))
        connection.execute(
            ended.values(ended_at=2.0, exit_code=0, outcome="SUCCEEDED"),
            [{"row_id": e} for e in claims.values()],
        )
        moved = tasks.update().where(tasks.c.key == bindparam("row_key"))
        connection.execute(
            moved.values(state=TaskState.SUCCEEDED, finished_at=2.0, updated_at=2.0,
                          execution_id=None, lease_owner=None, lease_expires_at=None),
            [{"row_key": k} for k in claims],
        )  # fmt: skip
        connection.execute(events.insert(), [_event(k) for k in claims])
        session.rollback()


def driver_exit(store: Store, claims: dict[str, str]) -> None:
    mark = "?" if store.is_sqlite else "%s"
    listed = ", ".join(mark for _ in claims)
    lock = "" if store.is_sqlite else " FOR UPDATE"
    columns = ", ".join(c.name for c in table_of(Task).columns)
    with store.write() as session:
        cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(
            f"SELECT {columns} FROM relay_task WHERE key IN ({listed}){lock}", list(claims)
        )
        cursor.fetchall()
        cursor.executemany(
            f"UPDATE relay_execution SET ended_at = {mark}, exit_code = {mark}, outcome = {mark} "
            f"WHERE id = {mark}",
            [(2.0, 0, "SUCCEEDED", e) for e in claims.values()],
        )
        cursor.executemany(
            f"UPDATE relay_task SET state = {mark}, finished_at = {mark}, updated_at = {mark}, "
            f"execution_id = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE key = {mark}",
            [(TaskState.SUCCEEDED.value, 2.0, 2.0, k) for k in claims],
        )
        row = _event("")
        names = ", ".join(row)
        cursor.executemany(
            f"INSERT INTO relay_event ({names}) VALUES ({', '.join(mark for _ in row)})",
            [tuple(_event(k).values()) for k in claims],
        )
        session.rollback()


def _event(key: str) -> dict[str, Any]:
    return {"at": 2.0, "job_id": JOB, "task_key": key, "kind": "task.succeeded",
            "level": "info", "message": f"{key} succeeded"}  # fmt: skip


WAYS: dict[str, Callable[[Store, dict[str, str]], None]] = {
    "engine": engine_exit,
    "core": core_exit,
    "driver": driver_exit,
}


def cpu_ms(way: Callable[[Store, dict[str, str]], None], store: Store, claims: dict[str, str],
           repeat: int) -> float:  # fmt: skip
    """Thread CPU per transaction: the median of five blocks, after a warm-up (SQLAlchemy
    compiles each statement once, a cost per engine rather than per exit)."""
    for _ in range(30):
        way(store, claims)
    blocks = []
    for _ in range(5):
        began = time.thread_time()
        for _ in range(repeat):
            way(store, claims)
        blocks.append((time.thread_time() - began) / repeat * 1000)
    return statistics.median(blocks)


def measure(label: str, store: Store, exits: int, repeat: int) -> None:
    claims = seed(store, exits)
    spent = {name: cpu_ms(way, store, claims, repeat) for name, way in WAYS.items()}
    driver = spent["driver"]
    print(f"{label}: the exit write of {exits} tasks, CPU per transaction")
    for name, ms in spent.items():
        print(f"  {name:7} {ms:6.3f} ms   {ms / driver:4.2f}x the driver's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exits", type=int, default=2, help="tasks the write ends")
    parser.add_argument("--repeat", type=int, default=300, help="transactions per block")
    parser.add_argument("--db", default=os.environ.get("RELAY_BENCH_PG_URL"))
    args = parser.parse_args()
    backends = [("SQLite", None), *([("PostgreSQL", args.db)] if args.db else [])]
    for label, server in backends:
        with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp, fresh_url(server) as url:
            store = Store(url) if url else Store.for_workspace(Path(tmp))
            measure(label, store, args.exits, args.repeat)
            store.dispose()


if __name__ == "__main__":
    main()
