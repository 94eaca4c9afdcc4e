"""Finds or builds the native supervisor (``supervisor.c``), once per host, for the engine to start per agent.

A Python supervisor forked from the warm fork server still cost ~2.9 ms of CPU per start
over a bare fork-exec (the copy-on-write faults of a forked interpreter) and ~1.1 MB of PSS
per running agent; the same supervisor in C starts no interpreter at all. It is compiled
from the source shipped beside this module the first time an engine on the host needs it,
and cached under the hash of that source, the compiler command and the machine, so a new
relay (or another compiler) builds its own and engines never share a stale one. Where it
cannot be built -- no C compiler, a build that fails, no folder to keep it in, not Linux --
the reason is kept and logged once, and the engine falls back to the Python supervisor
(:mod:`relay_engine.agents.supervisor`, forked by :mod:`relay_engine.agents.forkserver`),
which stays the readable spec of what both do.

``RELAY_SUPERVISOR`` chooses explicitly: ``native`` (the default; where it cannot be built,
the same fallback), ``fork`` (the Python supervisor, forked) or ``exec`` (the Python
supervisor started as a script).
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shlex
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("supervisor.c")
CFLAGS = ("-O2", "-Wall", "-Wextra", "-std=c11")
BUILD_TIMEOUT_S = 60.0
MODE_ENV = "RELAY_SUPERVISOR"
MODES = ("native", "fork", "exec")


@dataclass(frozen=True)
class Build:
    """This host's native supervisor: the binary, or (``binary`` None) why there is none."""

    binary: str | None
    reason: str = ""


def mode(env: Mapping[str, str] = os.environ) -> str:
    """The supervisor ``RELAY_SUPERVISOR`` asks for; anything unknown is the default."""
    asked = env.get(MODE_ENV, "native")
    return asked if asked in MODES else "native"


def compiler(env: Mapping[str, str]) -> list[str]:
    """``$CC`` (which may carry flags of its own, ``ccache gcc``), else ``cc``."""
    return shlex.split(env.get("CC") or "") or ["cc"]


def cache_dir(env: Mapping[str, str]) -> Path:
    """``$RELAY_CACHE_DIR``, else ``$XDG_CACHE_HOME/relay``, else ``~/.cache/relay``."""
    if env.get("RELAY_CACHE_DIR"):
        return Path(env["RELAY_CACHE_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "relay"
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".cache" / "relay"


def private_tmp_dir() -> Path:
    """Where the binary goes when the cache folder cannot hold it: a folder of this user's
    own under the temporary directory, which other users must not be able to plant in."""
    return Path(tempfile.gettempdir()) / f"relay-{os.getuid()}"


def binary_name(source: bytes, command: list[str]) -> str:
    """The cached binary's name: a new source, compiler command or machine is a new name."""
    key = hashlib.sha256(source)
    key.update("\0".join(["", *command, platform.machine()]).encode())
    return f"supervisor-{key.hexdigest()[:16]}"


def find_or_build(env: Mapping[str, str] = os.environ) -> Build:
    """The cached binary, else one built now (never memoized: see :func:`native_supervisor`)."""
    if not sys.platform.startswith("linux"):
        return Build(None, "not Linux (it needs signalfd and prctl)")
    try:
        source = SOURCE.read_bytes()
    except OSError as error:
        return Build(None, f"cannot read {SOURCE}: {error.strerror}")
    command = [*compiler(env), *CFLAGS]
    name = binary_name(source, command)
    problems = []
    for folder, private in ((cache_dir(env), False), (private_tmp_dir(), True)):
        binary = folder / name
        if (not private or _is_private(folder)) and os.access(binary, os.X_OK):
            return Build(str(binary))
        problem = _make_room(folder, private)
        if problem is None:
            return _compile(command, binary, env)
        problems.append(problem)
    return Build(None, "nowhere to keep it: " + "; ".join(problems))


def _is_private(folder: Path) -> bool:
    """A real folder (no link), this user's, that nobody else may write to or read."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    mine = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    return mine and not info.st_mode & 0o077


def _make_room(folder: Path, private: bool) -> str | None:
    """Make ``folder`` ready to build into; None when it is, else why it is not."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create {folder}: {error.strerror}"
    if private and not _is_private(folder):
        return f"{folder} is not a private folder of this user"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def _compile(command: list[str], binary: Path, env: Mapping[str, str]) -> Build:
    """Compile to a name of our own, then rename it into place: engines on one host may build
    at the same moment, and a reader must never find half a binary."""
    tmp = binary.with_name(f".{binary.name}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        done = subprocess.run(
            [*command, "-o", str(tmp), str(SOURCE)],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0:
            os.replace(tmp, binary)
            return Build(str(binary))
    except FileNotFoundError:
        return Build(None, f"no C compiler: {command[0]} not found")
    except subprocess.TimeoutExpired:
        return Build(None, f"{command[0]} took over {BUILD_TIMEOUT_S:g} s")
    except OSError as error:
        return Build(None, f"cannot run {command[0]}: {error.strerror or error}")
    finally:
        tmp.unlink(missing_ok=True)
    failed = f"{command[0]} failed (exit {done.returncode})"
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return Build(None, f"{failed}: {said[0]}" if said else failed)


_memo: list[Build] = []
_memo_lock = threading.Lock()


def native_supervisor() -> Build:
    """This host's native supervisor, found or built on this process's first use and kept:
    every agent start asks, so after the first it costs a list look-up. A failure is logged
    once, with its reason, as the engine falls back to the Python supervisor."""
    if _memo:
        return _memo[0]
    with _memo_lock:
        if not _memo:
            build = find_or_build()
            if build.binary is None:
                log.warning(
                    "no native supervisor (%s): agents run under the Python one", build.reason
                )
            _memo.append(build)
        return _memo[0]


def forget() -> None:
    """Look again on the next start (the cached binary vanished; a test changed the host)."""
    with _memo_lock:
        _memo.clear()


def describe(env: Mapping[str, str] = os.environ) -> str:
    """Which supervisor this host's engines use, and why, in one line (``relay doctor``)."""
    chosen = mode(env)
    if chosen != "native":
        label = "python fork server" if chosen == "fork" else "python script"
        return f"{label} ({MODE_ENV}={chosen})"
    build = native_supervisor()
    if build.binary is not None:
        home = os.path.expanduser("~")
        shown = (
            "~" + build.binary[len(home) :] if build.binary.startswith(home + "/") else build.binary
        )
        return f"native ({shown})"
    fallback = "python fork server" if sys.platform.startswith("linux") else "python script"
    return f"{fallback} — {build.reason}"
