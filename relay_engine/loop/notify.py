"""Notifications that leave the machine: a webhook and/or a command per chosen event.

Delivery never blocks the tick: a notifier thread follows the event feed on its own.
Engines sharing a database share one cursor per destination, advanced in the transaction
that takes a batch, so a fleet of engines posts each event to a webhook once (at most
once: a batch whose engine dies mid-delivery is not sent again). A failed delivery is an
event of its own (``notify.failed``), never a crash and never itself notified.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from relay_engine.contracts.config import NotificationConfig
from relay_engine.store import feed
from relay_engine.store.db import Store, ensure_row
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.feed import FeedMark
from relay_engine.store.schema import Event, NotifyCursor

log = logging.getLogger(__name__)

BATCH = 100
WEBHOOK_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 10.0
RETRY_DELAYS_S = (0.5, 2.0)
STOP_WAIT_S = 20.0
"""How long a stopping engine waits for the last notifications (a finished job) to go out."""
OWN_KINDS = "notify."


@dataclass(frozen=True)
class Destination:
    """Where notifications go; ``key`` names the shared cursor of this destination."""

    kind: str  # "webhook" | "command"
    target: str | tuple[str, ...]

    @property
    def key(self) -> str:
        digest = hashlib.sha256(json.dumps([self.kind, self.target]).encode()).hexdigest()
        return f"{self.kind}:{digest[:16]}"

    @property
    def label(self) -> str:
        """How events name it: a webhook by its host only (its path often holds a token)."""
        if isinstance(self.target, str):
            parts = urllib.parse.urlsplit(self.target)
            return f"{parts.scheme}://{parts.hostname or '?'}"
        return self.target[0]


def destinations(config: NotificationConfig) -> list[Destination]:
    found = []
    if config.webhook:
        found.append(Destination("webhook", config.webhook))
    if config.command:
        found.append(Destination("command", tuple(config.command)))
    return found


def wanted(kind: str, patterns: Sequence[str]) -> bool:
    """``on`` entries are event kinds or shell patterns (``task.*``); relay's own
    notification failures are never notified, or a dead webhook would feed itself."""
    if kind.startswith(OWN_KINDS):
        return False
    return any(fnmatch.fnmatchcase(kind, pattern) for pattern in patterns)


def payload(event: Event, host: str) -> dict[str, Any]:
    """The JSON body a webhook receives and a command reads on stdin."""
    return {
        "id": event.id,
        "kind": event.kind,
        "at": event.at,
        "level": event.level,
        "job": event.job_id,
        "task": event.task_key,
        "plan": event.plan_id,
        "message": event.message,
        "data": event.data or {},
        "host": host,
    }


def take_batch(session: Session, destination: Destination, now: float) -> list[Event]:
    """Events after this destination's cursor, with the cursor moved past them (and past
    the ids still in flight, which it asks for again: :mod:`relay_engine.store.feed`).

    A destination seen for the first time starts at the feed's end: turning
    notifications on does not replay the whole history.
    """
    query = select(NotifyCursor).where(NotifyCursor.destination == destination.key)
    cursor = session.exec(query.with_for_update()).first()
    if cursor is None:
        start = feed.end(session, now)
        ensure_row(
            session, NotifyCursor, destination=destination.key,
            last_event_id=start.top, gaps=_gaps_of(start),
        )  # fmt: skip
        cursor = session.exec(query.with_for_update()).one()
    mark = _mark_of(cursor)
    events, after = feed.read_after(session, mark, now, BATCH)
    if after != mark:
        cursor.last_event_id = after.top
        cursor.gaps = _gaps_of(after)
        cursor.updated_at = now
        session.add(cursor)
    return events


def _gaps_of(mark: FeedMark) -> list[list[float]]:
    """A mark's gaps as the cursor row keeps them (JSON)."""
    return [list(gap) for gap in mark.gaps]


def _mark_of(cursor: NotifyCursor) -> FeedMark:
    gaps = tuple((int(gap), float(since)) for gap, since in cursor.gaps or ())
    return FeedMark(cursor.last_event_id, gaps)


def deliver_webhook(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "User-Agent": "relay-notify"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:
        response.read(1024)


def deliver_command(argv: tuple[str, ...], body: dict[str, Any]) -> None:
    done = subprocess.run(
        list(argv),
        input=json.dumps(body).encode("utf-8"),
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"exit {done.returncode}: {tail[0][:200]}")


DELIVERY_ERRORS = (OSError, urllib.error.URLError, subprocess.SubprocessError, RuntimeError)


def deliver(destination: Destination, body: dict[str, Any]) -> str | None:
    """Send one notification with retries; the last error when every try failed."""
    send: Callable[[Any, dict[str, Any]], None] = (
        deliver_webhook if destination.kind == "webhook" else deliver_command
    )
    error = ""
    for delay in (0.0, *RETRY_DELAYS_S):
        time.sleep(delay)  # only the notifier thread waits here, never the tick
        try:
            send(destination.target, body)
        except DELIVERY_ERRORS as exc:
            error = str(exc) or type(exc).__name__
            continue
        return None
    return error


class Notifier:
    """A thread that follows the event feed and delivers what ``[notifications]`` asks for."""

    def __init__(self, store: Store, config: Callable[[], NotificationConfig]) -> None:
        self.store = store
        self.config = config
        self.host = socket.gethostname()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="relay-notify", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.drain()
            except Exception:  # the database may be away for a while; try again later
                log.exception("notifier pass failed")
                busy = False
            if not busy:
                self._wake.wait(1.0)
                self._wake.clear()
        self.drain()  # what the engine did last (a finished job) still goes out

    def drain(self) -> bool:
        """One pass over every destination; True when a full batch suggests more."""
        settings = self.config()
        full = False
        for destination in destinations(settings):
            if not self._news_for(destination):
                continue
            with self.store.write() as session:
                events = take_batch(session, destination, time.time())
            for event in events:
                if wanted(event.kind, settings.on):
                    self._send(destination, event)
            full |= len(events) == BATCH
        return full

    def _news_for(self, destination: Destination) -> bool:
        """A cheap read first, so an idle fleet takes no write lock every second."""
        with self.store.read() as session:
            cursor = session.get(NotifyCursor, destination.key)
            if cursor is None:
                return True
            return feed.news_since(session, _mark_of(cursor), time.time())

    def _send(self, destination: Destination, event: Event) -> None:
        error = deliver(destination, payload(event, self.host))
        if error is None:
            return
        with self.store.write() as session:
            record_event(
                session,
                EventKind.NOTIFY_FAILED,
                f"notification of {event.kind} to {destination.kind} {destination.label} "
                f"failed: {error}"[:500],
                now=time.time(),
                job_id=event.job_id,
                task_key=event.task_key,
                level="warning",
                data={"event": event.id, "destination": destination.kind},
            )
