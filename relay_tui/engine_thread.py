"""The engine the console embeds: one thread of its own, started on mount, stopped on quit.

Kept apart from the app so its lifecycle (start, stop with release, report how it ended)
reads in one place and the app only hears about it through callbacks.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from relay_engine.contracts.config import RelayConfig
from relay_engine.ops.commands import OperatorCommand, enqueue
from relay_engine.store.db import Store

if TYPE_CHECKING:  # imported when the thread starts: the console opens without it
    from relay_engine.loop.engine import Engine

STOP_TIMEOUT = 20.0


class EngineThread:
    """Runs :class:`relay_engine.loop.engine.Engine` in a daemon thread.

    ``on_change`` is called (from the engine thread) whenever a tick changed something, and
    ``on_stopped`` once when the loop has ended, with the error that ended it or None.
    """

    def __init__(
        self,
        workspace: Path,
        store: Store,
        config: RelayConfig,
        *,
        on_change: Callable[[], None],
        on_stopped: Callable[[str | None], None],
    ) -> None:
        self.workspace = workspace
        self.store = store
        self.config = config
        self.engine: Engine | None = None
        self._on_change = on_change
        self._on_stopped = on_stopped
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="relay-engine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        error: str | None = None
        try:
            from relay_engine.loop.engine import Engine

            engine = Engine(self.workspace, store=self.store, config=self.config)
            engine.subscribe(self._on_change)
            self.engine = engine
            if not self._stop.is_set():
                engine.run(self._stop)
        except Exception as exc:  # reported to the operator; the console keeps running
            error = (
                f"the engine stopped: {exc!r}"
                if self.engine
                else f"the engine could not start: {exc}"
            )
        finally:
            self._done.set()
            self._on_stopped(error)

    def submit(self, command: OperatorCommand) -> int:
        """Through the engine's inbox (it wakes at once), or the Command table before it runs."""
        if self.engine is not None and self.running:
            return self.engine.submit(command)
        return enqueue(self.store, command)

    def live_count(self) -> int:
        return self.engine.live_count() if self.engine is not None and self.running else 0

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Blocking: stop the loop, release live agents to the queue, wait for the thread."""
        self._stop.set()
        if self.engine is not None:
            try:
                self.engine.stop(release=True, timeout=timeout)
            except Exception as error:  # the console must still exit
                print(f"relay-tui: stopping the engine failed: {error}", file=sys.stderr)
        if self._thread is not None:
            self._done.wait(timeout)
