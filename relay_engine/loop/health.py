"""What holds an engine up -- disk full, database busy or unreachable, a value in it that
cannot be read -- and when it is over.

A tick that fails on one of these does not kill the engine: the condition is logged once
("database busy, retrying", "disk full: dispatch paused …"), shown by ``relay status``
and the console (``Engine.condition``, the ``relay_engine.condition`` column, and
``engine.paused`` / ``engine.resumed`` events when they can be written), and cleared by
the first tick that writes again. While the disk is full nothing new is dispatched and no
failure is charged to a task.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.exc import DBAPIError
from sqlmodel import col, update

from relay_engine.core.faults import StoredValueFault, first_line, is_busy, is_disk_full
from relay_engine.core.outcomes import Outcome, OutcomeKind
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import EngineRecord

if TYPE_CHECKING:  # the runtime loads git and the agents; `relay status` reads low_space only
    from relay_engine.loop.runtime import EngineRuntime

log = logging.getLogger(__name__)

DISK_FULL = "disk full"
DB_BUSY = "database busy"
DB_UNREACHABLE = "database unreachable"
BAD_VALUE = "bad value in the database"
PROBE_BYTES = 64 << 10
LOW_SPACE_BYTES = 1 << 20
_UNREACHABLE_TEXT = ("connection", "could not connect", "server closed", "terminating")
_MESSAGES = {
    DISK_FULL: "disk full: dispatch paused, running agents keep going and nothing is charged "
    "to tasks; resuming when writes succeed again",
    DB_BUSY: "database busy, retrying",
    DB_UNREACHABLE: "database unreachable, retrying",
    BAD_VALUE: "a value in the database cannot be read, retrying until it is corrected",
}


def classify(error: BaseException) -> str | None:
    """The condition a failed tick is in, or None when the error must stop the engine."""
    if is_disk_full(error):
        return DISK_FULL
    if isinstance(error, StoredValueFault):
        return BAD_VALUE
    if not isinstance(error, DBAPIError):
        return None
    if is_busy(error):
        return DB_BUSY
    text = str(error.orig if error.orig is not None else error).lower()
    return DB_UNREACHABLE if any(m in text for m in _UNREACHABLE_TEXT) else None


def disk_has_room(directory: Path) -> bool:
    """Whether a real write of a little data succeeds there now (free-space figures lie on
    some filesystems, a write does not)."""
    probe = directory / f".space-probe-{os.getpid()}"
    try:
        with open(probe, "wb") as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def low_space(directory: Path) -> str | None:
    """ "disk full" when the filesystem of ``directory`` has (almost) no room left."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    return DISK_FULL if free < LOW_SPACE_BYTES else None


def excuse(outcome: Outcome, stderr_tail: str, condition: str | None) -> Outcome:
    """A run that failed while the disk was full is released (refunded), not charged."""
    if outcome.kind not in (OutcomeKind.FAILED, OutcomeKind.TIMEOUT):
        return outcome
    if condition != DISK_FULL and "no space left on device" not in stderr_tail.lower():
        return outcome
    return replace(outcome, kind=OutcomeKind.RELEASED, error="disk full while it ran: not charged")


class Health:
    """One engine's condition (kept on its runtime), logged and recorded when it changes."""

    def __init__(self, runtime: EngineRuntime) -> None:
        self.runtime = runtime

    @property
    def condition(self) -> str | None:
        return self.runtime.condition

    def failed(self, condition: str, error: BaseException, now: float) -> None:
        if condition == self.runtime.condition:
            return
        self.runtime.condition = condition
        detail = "" if condition == DISK_FULL else f": {first_line(error)}"
        log.warning("%s%s", _MESSAGES[condition], detail)
        self._record(now, EventKind.ENGINE_PAUSED, _MESSAGES[condition], "warning")

    def succeeded(self, now: float) -> None:
        """A tick went through: the condition is over (for disk full, once a write fits)."""
        was = self.runtime.condition
        if was is None:
            return
        if was == DISK_FULL and not disk_has_room(self.runtime.workspace / ".relay"):
            return
        self.runtime.condition = None
        log.warning("%s is over: back to work", was)
        self._record(now, EventKind.ENGINE_RESUMED, f"{was} is over: dispatch resumed", "info")

    def _record(self, now: float, kind: EventKind, message: str, level: str) -> None:
        """Best effort: a full disk or a busy database may refuse this write too."""
        engine_id, condition = self.runtime.engine_id, self.runtime.condition
        try:
            with self.runtime.store.write() as session:
                session.exec(
                    update(EngineRecord)
                    .where(col(EngineRecord.id) == engine_id)
                    .values(condition=condition)
                )
                record_event(
                    session,
                    kind,
                    f"engine {engine_id}: {message}",
                    now=now,
                    level=level,
                    data={"engine": engine_id, "condition": condition},
                )
        except Exception as error:  # the condition is still logged and kept in memory
            log.debug("could not record engine condition: %s", error)
