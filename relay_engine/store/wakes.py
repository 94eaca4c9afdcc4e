"""Wake-ups across processes: work written elsewhere is seen at once, not a tick later.

A submit from ``relay submit``, a cancel from ``relay cancel``, an answer from a console
attached to the database: an engine used to find them at its next full tick, and an engine
whose fleet had no work at all still ticked every ``tick_seconds`` in case one came. Now
every write of a process that runs no engine, and an engine's own submits and applied
commands, send a wake-up; each engine listens, looks at once, and sleeps while its fleet
has nothing to do (:meth:`~relay_engine.loop.engine.Engine.run`).

PostgreSQL: the write sends ``NOTIFY relay_wake`` in its transaction (delivered to every
engine on every host when it commits); each engine LISTENs on a connection of its own, and
counts itself as hearing them once a probe it sent itself came back.
SQLite (one host): the writer rewrites a file in the database's ``-wake`` folder after it
commits, and each engine watches that folder. A listener that is down cannot know what it
missed, so an engine sleeps only while its listener is up (:attr:`WakeListener.up`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlmodel import Session

log = logging.getLogger(__name__)
CHANNEL = "relay_wake"
LISTENER_NAME = "relay wake-ups"  # its connection's application_name, as pg_stat_activity shows
NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', '')")
WAKE_FILE = "wake"
SILENCE_CHECK_S = 10.0
"""How long a PostgreSQL listener hears nothing before it asks the server whether the
connection still stands (a cut cable raises nothing by itself)."""
RECONNECT_MAX_S = 30.0
HEARD, NOT_HEARD, OFF = "heard", "not heard", "off"
"""What an engine records of its wake-ups (``relay engines`` shows the middle one)."""
PROBE_S = 5.0
"""How long a new listener waits for its own probe before it says wake-ups do not arrive."""


@dataclass(frozen=True)
class WakeChannel:
    """Where a database's wake-ups travel: a folder beside a SQLite file, or a PostgreSQL
    channel; neither for an in-memory database, whose only engine is in the same process."""

    sqlite_path: str | None = None
    conninfo: str | None = None  # libpq's URL of the PostgreSQL server

    @classmethod
    def of(cls, url: str, sqlite_path: str | None) -> WakeChannel:
        if sqlite_path is not None:
            return cls(sqlite_path=sqlite_path)
        if url.startswith("postgresql"):
            server = make_url(url).set(drivername="postgresql")
            return cls(conninfo=server.render_as_string(hide_password=False))
        return cls()

    @property
    def folder(self) -> Path | None:
        return Path(self.sqlite_path + "-wake") if self.sqlite_path else None

    def send(self, session: Session) -> None:
        """Inside the write's transaction: PostgreSQL delivers it when the write commits
        (and never, when it rolls back)."""
        if self.conninfo is not None:
            session.execute(NOTIFY)

    def sent(self) -> None:
        """After the write committed (SQLite): the watched file changes. A folder that
        cannot be written (a read-only mount) only costs the engines their tick's wait."""
        folder = self.folder
        if folder is None:
            return
        stamp = f"{time.time_ns()}\n"
        try:
            try:
                (folder / WAKE_FILE).write_text(stamp)
            except FileNotFoundError:  # no engine has listened here yet
                folder.mkdir(exist_ok=True)
                (folder / WAKE_FILE).write_text(stamp)
        except OSError as error:
            log.debug("no wake-up sent to %s: %s", folder, error)


class WakeListener:
    """Calls ``on_wake`` for every wake-up heard, until ``stop``.

    PostgreSQL: a LISTEN connection in a thread of its own. SQLite: the caller's file
    watcher watches the folder :meth:`start` returns and hands its changes to :meth:`heard`
    (one watchfiles thread for relay.toml and the wake-ups: each such thread wakes 20
    times a second to look at its stop event, 2 ms of CPU a second)."""

    def __init__(
        self, channel: WakeChannel, on_wake: Callable[[], None], stop: threading.Event
    ) -> None:
        self.channel = channel
        self.on_wake = on_wake
        self.stop = stop
        self._up = threading.Event()
        self._started = 0.0

    @property
    def up(self) -> bool:
        """Whether a wake-up sent now would be heard."""
        return self._up.is_set()

    @property
    def said(self) -> str | None:
        """:data:`HEARD` or :data:`NOT_HEARD`, as the engine records it; None while a new
        listener may still be waiting for its probe."""
        if self._up.is_set():
            return HEARD
        return NOT_HEARD if time.monotonic() - self._started > PROBE_S else None

    def start(self) -> Path | None:
        """Listen from now on; the folder to watch, on SQLite."""
        self._started = time.monotonic()
        if self.channel.conninfo is not None:
            conninfo = self.channel.conninfo
            threading.Thread(
                target=self._listen, args=(conninfo,), daemon=True, name="relay-wakes"
            ).start()
            return None
        folder = self.channel.folder
        if folder is None:
            return None
        try:
            folder.mkdir(exist_ok=True)
        except OSError as error:
            log.warning("not listening for wake-ups in %s: %s", folder, error)
            return None
        self._up.set()
        return folder

    def heard(self, paths: Iterable[Path]) -> None:
        """A file watcher's changes: a wake-up when one is in the wake folder."""
        if any(path.parent == self.channel.folder for path in paths):
            self.on_wake()

    def deaf(self) -> None:
        """The file watcher stopped."""
        self._up.clear()

    def _listen(self, conninfo: str) -> None:
        import psycopg  # only with the postgres extra

        wait = 1.0
        while not self.stop.is_set():
            try:
                with psycopg.connect(
                    conninfo, autocommit=True, connect_timeout=5, application_name=LISTENER_NAME
                ) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    wait = 1.0
                    self.on_wake()  # whatever was written while nobody listened
                    self._hear(connection)
            except psycopg.Error as error:
                if self.stop.is_set():
                    return  # its engine stopped, and the database may be gone with it
                if self._up.is_set() or wait == 1.0:
                    log.warning("not hearing wake-ups (retrying): %s", error)
            finally:
                self._up.clear()
            self.stop.wait(wait)
            wait = min(wait * 2, RECONNECT_MAX_S)

    def _hear(self, connection: Any) -> None:
        """Up once a probe of its own comes back: behind a pooler in transaction mode
        (pgbouncer) LISTEN is accepted and nothing sent after it arrives, and an engine
        that trusted it would sleep through every submit."""
        probe = uuid.uuid4().hex
        send_probe(connection, probe)
        sent = quiet_since = time.monotonic()
        while not self.stop.is_set():
            heard = False
            for notice in connection.notifies(timeout=1.0):
                heard = True
                if notice.payload == probe:
                    self._up.set()
                elif not notice.payload:  # other engines' probes are theirs
                    self.on_wake()
            now = time.monotonic()
            if not self._up.is_set() and sent and now - sent > PROBE_S:
                sent = 0.0  # said once per connection
                log.warning(
                    "wake-ups sent on the database do not come back (a pooler in transaction "
                    "mode?): ticking every tick_seconds; [engine] wake_ups = false stops listening"
                )
            if heard:
                quiet_since = now
            elif now - quiet_since > SILENCE_CHECK_S:
                connection.execute("SELECT 1")
                quiet_since = now


def send_probe(connection: Any, probe: str) -> None:
    """A wake-up only its sender looks for (engines wake for an empty payload alone)."""
    connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, probe))


def wake_ups_come_back(conninfo: str, within: float = PROBE_S) -> bool:
    """Whether a wake-up sent on this server reaches a listener, as an engine's would:
    LISTEN, a probe of its own, and up to ``within`` seconds for it. False behind a pooler
    in transaction mode (LISTEN accepted, nothing delivered after it). Connection failures
    raise (``psycopg.Error``)."""
    import psycopg  # only with the postgres extra

    probe = uuid.uuid4().hex
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as connection:
        connection.execute(f"LISTEN {CHANNEL}")
        send_probe(connection, probe)
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            if any(n.payload == probe for n in connection.notifies(timeout=left, stop_after=1)):
                return True
    return False
