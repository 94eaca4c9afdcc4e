"""The reader thread: turns the database's change feed into snapshots for the UI.

At most one snapshot is in flight: the next is read (coalescing every change since) only
once the UI has applied and painted the previous one (or :data:`ACK_WAIT_SECONDS` passed
without its word), and no sooner than :data:`BUSY_SHARE` of the UI's time allows, so key
presses always find the UI thread free.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from relay_engine.contracts.config import RelayConfig
from relay_engine.store.db import Store
from relay_tui.data.projection import Projection
from relay_tui.data.snapshot import Snapshot

MIN_FRAME_SECONDS = 0.05  # at most 20 snapshots a second reach the UI
MAX_FRAME_SECONDS = 1.0
BUSY_SHARE = 0.25
ERROR_PAUSE_SECONDS = 2.0
ACK_WAIT_SECONDS = 2.0
"""The longest the reader waits for the UI to say it painted the last snapshot. Textual
runs an after-refresh callback on the screen current when it was asked for, and a screen
closed before it painted never runs it (keys in bursts opening and closing screens): a lost
acknowledgement then costs one frame's delay, not every frame after it."""


class FeedReader:
    """Reads snapshots off the UI thread; ``deliver`` and ``failed`` are called from it."""

    def __init__(
        self,
        store: Store,
        *,
        deliver: Callable[[Snapshot], None],
        failed: Callable[[str], None],
        poll_interval: float,
        lease_seconds: float,
        clock: Callable[[], float],
        config: RelayConfig | None = None,
    ) -> None:
        self.projection = Projection(store, lease_seconds=lease_seconds, clock=clock, config=config)
        self._deliver = deliver
        self._failed = failed
        self.poll_interval = poll_interval
        self.ui_busy_seconds = 0.0
        self._nudge = threading.Event()
        self._consumed = threading.Event()
        self._consumed.set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="relay-feed", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """Something changed: read now instead of at the next poll."""
        self._nudge.set()

    def painted(self, busy_seconds: float) -> None:
        """The UI applied and painted the last snapshot (taking ``busy_seconds``)."""
        self.ui_busy_seconds = busy_seconds
        self._consumed.set()

    def stop(self) -> None:
        self._stop.set()
        self._nudge.set()
        self._consumed.set()

    def watch_command(self, command_id: int) -> None:
        self.projection.watch_command(command_id)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            while not self._consumed.wait(0.25):
                if self._stop.is_set():
                    return
                if time.monotonic() - started >= ACK_WAIT_SECONDS:
                    break
            pace = min(MAX_FRAME_SECONDS, self.ui_busy_seconds / BUSY_SHARE)
            try:
                snapshot = self.projection.load()
            except Exception as error:  # a transient DB error must not kill the console
                self._failed(f"reading the database failed: {error}")
                self._stop.wait(ERROR_PAUSE_SECONDS)
                continue
            if self._stop.is_set():
                return
            self._consumed.clear()
            self._deliver(snapshot)
            self._nudge.wait(self.poll_interval)
            self._nudge.clear()
            rest = max(MIN_FRAME_SECONDS, pace) - (time.monotonic() - started)
            if rest > 0:
                self._stop.wait(rest)
