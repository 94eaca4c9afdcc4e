"""Following an execution's stdout artifact: only what was appended since the last read.

The reader keeps a byte offset. Each poll reads the new bytes, splits complete lines (a line
still being written waits for its newline) and parses them; a file that shrank was
rewritten, so reading starts over. A huge file is entered near its end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from relay_engine.agents.adapters.base import LineBuffer
from relay_tui.data.stream import StreamItem, parse_line

STDOUT_NAME = "stdout.txt"
FIRST_READ_BYTES = 512 * 1024
CHUNK_BYTES = 1024 * 1024
POLL_SECONDS = 0.2

Delivered = Callable[[list[StreamItem], list[str], bool], None]


class OutputFollower:
    """Reads ``path`` as it grows and hands parsed items and raw lines to ``deliver``."""

    def __init__(self, path: Path, provider: str | None, deliver: Delivered) -> None:
        self.path = path
        self.provider = provider
        self.deliver = deliver
        self.offset = 0
        self.lines = LineBuffer()
        self.stop = threading.Event()
        self.finished = False
        """Set once the execution ended: a last line without a newline is then shown too."""
        self._flushed = False

    def start(self) -> None:
        threading.Thread(target=self._run, name="relay-output", daemon=True).start()

    def _run(self) -> None:
        first = True
        while not self.stop.is_set():
            restarted = self._check_rewritten() or first
            lines = self._read_new(first)
            if not lines and self.finished and not self._flushed:
                self._flushed = True
                lines = list(self.lines.close())
            if lines or restarted:
                items = [item for line in lines for item in parse_line(self.provider, line)]
                self.deliver(items, lines, restarted)
            first = False
            self.stop.wait(POLL_SECONDS)

    def _check_rewritten(self) -> bool:
        try:
            size = self.path.stat().st_size
        except OSError:
            return False
        if size >= self.offset:
            return False
        self.offset, self.lines = 0, LineBuffer()
        return True

    def _read_new(self, first: bool) -> list[str]:
        try:
            with self.path.open("rb") as handle:
                size = handle.seek(0, 2)
                if first and size > FIRST_READ_BYTES:
                    self.offset = size - FIRST_READ_BYTES
                handle.seek(self.offset)
                data = handle.read(CHUNK_BYTES)
        except OSError:
            return []
        skip_partial = first and self.offset > 0
        self.offset += len(data)
        lines = list(self.lines.feed(data))
        return lines[1:] if skip_partial and lines else lines
