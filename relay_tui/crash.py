"""When the console itself fails: keep the traceback in a file and say where it is.

Textual restores the terminal and prints a long traceback (with locals) after an unhandled
exception, then ``app.run()`` returns as if nothing happened. The operator needs three
things instead: the terminal back, a non-zero exit status, and one line naming the file
that holds the whole traceback (to read, or attach to a bug report).
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

CRASH_DIR = Path(".relay") / "logs"


def crash_dir(workspace: Path | None) -> Path:
    """The workspace's ``.relay/logs`` when writable, else the system temp directory."""
    if workspace is not None:
        directory = workspace / CRASH_DIR
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if os.access(directory, os.W_OK):
                return directory
        except OSError:
            pass
    return Path(tempfile.gettempdir())


def write_crash_report(error: BaseException, workspace: Path | None) -> Path:
    """Write the traceback of ``error``; returns the file's path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = crash_dir(workspace) / f"relay-tui-crash-{stamp}-{os.getpid()}.txt"
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    path.write_text(f"relay-tui crashed at {time.ctime()}\n\n{text}", encoding="utf-8")
    return path


def crash_message(error: BaseException, path: Path, *, embedded: bool) -> str:
    lines = [f"relay-tui crashed: {type(error).__name__}: {error}", f"The traceback is in {path}"]
    if embedded:
        lines.append("The embedded engine was stopped; running tasks went back to the queue.")
    return "\n".join(lines)
