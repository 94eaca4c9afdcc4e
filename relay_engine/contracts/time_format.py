"""Times as operators read them in events and tables.

Pure except that :func:`format_time` reads the local time zone and today's date.
"""

from __future__ import annotations

import time


def format_time(epoch: float | None) -> str:
    """Local wall-clock time, with the date only when it is not today."""
    if epoch is None:
        return "unknown"
    moment = time.localtime(epoch)
    if time.strftime("%Y-%m-%d", moment) == time.strftime("%Y-%m-%d"):
        return time.strftime("%H:%M:%S", moment)
    return time.strftime("%Y-%m-%d %H:%M", moment)
