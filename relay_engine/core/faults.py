"""What a database or disk failure means for a user: one line, what is wrong and the fix.

Pure: classifies exceptions (SQLAlchemy's, the drivers', the OS's) by their type, SQLSTATE
or text. The store raises :class:`DatabaseFault` when it cannot open a database; the CLI
prints any fault as one line and exits 2; the engine uses :func:`is_disk_full` and
:func:`is_busy` to pause or retry instead of dying.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_TEXT = ("database or disk is full", "no space left on device", "could not extend file")
_BUSY_TEXT = ("database is locked", "database is busy", "lock timeout", "idle-in-transaction")
_UNREACHABLE_TEXT = (
    "connection refused",
    "could not connect",
    "connection failed",
    "could not translate host name",
    "name or service not known",
    "timeout expired",
    "server closed the connection",
    "no route to host",
)
_PG_DISK_FULL, _PG_LOCK_NOT_AVAILABLE = "53100", "55P03"


class DatabaseFault(RuntimeError):
    """A database relay cannot use as it is; the message says why and what to do."""


class DatabaseBusy(DatabaseFault):
    """Another session held a lock longer than relay waits; trying again later will do."""


class StoredValueFault(DatabaseFault):
    """A value the database holds that relay cannot read (written by hand or by another
    program); the message shows it. Reads of it fail until it is corrected or removed."""


class DiskFull(RuntimeError):
    """Writes fail for lack of space; the engine pauses dispatch until they succeed again."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error, the driver error it wraps, and their causes."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for linked in (getattr(current, "orig", None), current.__cause__, current.__context__):
            if isinstance(linked, BaseException):
                stack.append(linked)


def _texts(error: BaseException) -> str:
    return " | ".join(str(e) for e in _chain(error)).lower()


def _sqlstates(error: BaseException) -> set[str]:
    return {str(getattr(e, "sqlstate", "")) for e in _chain(error)} - {"", "None"}


def is_disk_full(error: BaseException) -> bool:
    if isinstance(error, DiskFull) or _PG_DISK_FULL in _sqlstates(error):
        return True
    if any(isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS for e in _chain(error)):
        return True
    return any(marker in _texts(error) for marker in _DISK_FULL_TEXT)


def is_busy(error: BaseException) -> bool:
    """Another session holds a lock we waited for too long: retrying later will do."""
    if _PG_LOCK_NOT_AVAILABLE in _sqlstates(error):
        return True
    return any(marker in _texts(error) for marker in _BUSY_TEXT)


def first_line(error: BaseException) -> str:
    innermost = next((e for e in _chain(error) if getattr(e, "orig", None) is None), error)
    lines = [line.strip() for line in str(innermost).splitlines() if line.strip()]
    return lines[0] if lines else type(innermost).__name__


def _missing_driver(error: BaseException, scheme: str) -> str | None:
    texts = _texts(error)
    if "can't load plugin" not in texts and not isinstance(error, ImportError):
        return None
    if scheme.startswith("postgres"):
        return "PostgreSQL needs its driver: pip install 'relay[postgres]'"
    return (
        f"relay does not support {scheme or 'this kind of'} databases: use sqlite:///PATH, or "
        "postgresql://USER:PASSWORD@HOST/DB after pip install 'relay[postgres]'"
    )


def _sqlite_problem(texts: str, where: str) -> str | None:
    if "file is not a database" in texts:
        return f"{where} is not a relay database (not an SQLite file): point --db at one"
    if "malformed" in texts or "disk i/o error" in texts:
        return (
            f"{where} is corrupted: recover it with `sqlite3 {where} .recover | sqlite3 "
            f"{where}.recovered`, then move the result into place (keep the original)"
        )
    if "readonly database" in texts or "read-only" in texts:
        return f"{where} is read-only: relay status, events and relay-tui --db still work"
    if "unable to open database" in texts:
        return f"cannot open {where}: check that its directory exists and can be read"
    return None


def _server_problem(texts: str, where: str) -> str | None:
    if "password authentication failed" in texts or ('role "' in texts and "not exist" in texts):
        return f"PostgreSQL at {where} refused the login: fix the user and password in the URL"
    if "database" in texts and "does not exist" in texts:
        return f"{where}: that database does not exist on the server; create it (createdb NAME)"
    if any(marker in texts for marker in _UNREACHABLE_TEXT):
        return f"cannot reach PostgreSQL at {where}: start the server or fix the host and port"
    return None


def explain(error: BaseException, where: str, scheme: str = "") -> str:
    """One line for the user: what is wrong with the database ``where`` and how to fix it."""
    if isinstance(error, DatabaseFault):
        return str(error)
    driver = _missing_driver(error, scheme)
    if driver:
        return driver
    texts = _texts(error)
    if "could not parse sqlalchemy url" in texts:
        return f"{where} is not a database URL: use sqlite:///PATH or postgresql://USER@HOST/DB"
    if is_disk_full(error):
        return f"disk full: {where} cannot be written until space is freed"
    if is_busy(error):
        return f"database busy: another relay process holds {where}'s write lock; try again"
    problem = _sqlite_problem(texts, where) or _server_problem(texts, where)
    return problem or f"{where}: {first_line(error)}"
