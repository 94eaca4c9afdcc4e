"""The unit tier: pure code fed recorded data. No database, no process, no git, no socket.

The guard below makes a unit test that starts a process (git included), opens a socket or
a SQLite database fail at once, naming the tier it belongs to: tests/unit stays the loop a
developer can run before every commit.
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
from collections.abc import Callable

import pytest


def _refuse(what: str) -> Callable[..., None]:
    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(
            f"a unit test may not {what}: it belongs in tests/engine (docs/CONVENTIONS.md)"
        )

    return refused


@pytest.fixture(autouse=True)
def _unit_tests_do_no_io(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
    monkeypatch.setattr(socket.socket, "connect", _refuse("open a connection"))
    monkeypatch.setattr(socket.socket, "bind", _refuse("listen on a socket"))
    monkeypatch.setattr(sqlite3, "connect", _refuse("open a database"))
