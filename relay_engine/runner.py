"""Subprocess lifecycle for agent CLIs.

The child writes its stdout/stderr straight into files under the artifact directory, so an
agent that prints gigabytes or binary garbage never passes through engine memory. Every child
gets its own session (and so its own process group) so cancelling kills its whole tree.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

log = logging.getLogger(__name__)

STDOUT_NAME = "stdout.txt"
STDERR_NAME = "stderr.txt"
RESULT_NAME = "result.json"
_TAIL_BYTES = 8192
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


class LaunchError(RuntimeError):
    """The child could not be started at all (as opposed to starting and failing)."""


@dataclass(frozen=True)
class LaunchSpec:
    execution_id: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout_s: float
    artifact_dir: Path
    stdin_text: str | None = None


class RunningProcess:
    """Handle on a launched child; all reads go through the artifact files, never pipes."""

    def __init__(self, spec: LaunchSpec, proc: subprocess.Popen[bytes], started_at: float):
        self.spec = spec
        self.execution_id = spec.execution_id
        self.pid = proc.pid
        # start_new_session makes the child a session and group leader.
        self.pgid = proc.pid
        self.started_at = started_at
        self.ended_at: float | None = None
        self._proc = proc
        self._exited = threading.Event()
        self._stdout_offset = 0
        self._lock = threading.Lock()
        self._terminating = False
        self._kill_timer: threading.Timer | None = None

    @property
    def stdout_path(self) -> Path:
        return self.spec.artifact_dir / STDOUT_NAME

    @property
    def stderr_path(self) -> Path:
        return self.spec.artifact_dir / STDERR_NAME

    @property
    def result_path(self) -> Path:
        return self.spec.artifact_dir / RESULT_NAME

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._exited.is_set() else None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        self._exited.wait(timeout)
        return self.returncode

    def _mark_exited(self) -> None:
        self.ended_at = time.time()
        self._exited.set()

    def read_new_stdout(self, max_bytes: int = 1 << 20) -> bytes:
        """Return stdout bytes appended since the previous call, capped so memory stays bounded."""
        with self._lock:
            try:
                with open(self.stdout_path, "rb") as fh:
                    fh.seek(self._stdout_offset)
                    data = fh.read(max_bytes)
            except FileNotFoundError:
                return b""
            self._stdout_offset += len(data)
            return data

    def last_line(self, max_chars: int = 200) -> str:
        return last_line_of(self.stdout_path, max_chars)

    def stderr_tail(self, max_bytes: int = 8192) -> str:
        return _read_tail(self.stderr_path, max_bytes)[0].decode("utf-8", errors="replace")

    def timed_out(self, now: float) -> bool:
        return now - self.started_at > self.spec.timeout_s

    def terminate(self, grace_s: float = 5.0) -> None:
        """SIGTERM the group now and SIGKILL it after grace_s, without blocking the caller.

        The escalation runs even if the leader already exited, because grandchildren left in
        the group would otherwise outlive the cancel.
        """
        with self._lock:
            if self._terminating:
                return
            self._terminating = True
        kill_process_group(self.pgid, signal.SIGTERM)
        timer = threading.Timer(grace_s, kill_process_group, args=(self.pgid, signal.SIGKILL))
        timer.daemon = True
        self._kill_timer = timer
        timer.start()

    def kill_now(self) -> None:
        with self._lock:
            self._terminating = True
            timer = self._kill_timer
        if timer is not None:
            timer.cancel()
        kill_process_group(self.pgid, signal.SIGKILL)


def launch(spec: LaunchSpec, on_exit: Callable[[str], None] | None = None) -> RunningProcess:
    """Start spec.argv in its own process group with output going straight to disk.

    on_exit(execution_id) is called from a daemon thread as soon as the child is reaped, so
    the engine can wake without polling.
    """
    if not spec.argv:
        raise LaunchError(f"execution {spec.execution_id}: empty argv")
    spec.artifact_dir.mkdir(parents=True, exist_ok=True)
    exe = spec.argv[0]
    with (
        open(spec.artifact_dir / STDOUT_NAME, "wb") as out,
        open(spec.artifact_dir / STDERR_NAME, "wb") as err,
    ):
        try:
            proc = subprocess.Popen(
                spec.argv,
                cwd=spec.cwd,
                env=spec.env,
                stdin=subprocess.PIPE if spec.stdin_text is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise LaunchError(f"cannot start {exe!r} (cwd {spec.cwd}): {exc}") from exc
        started_at = time.time()
    running = RunningProcess(spec, proc, started_at)
    if spec.stdin_text is not None:
        _start_daemon(_feed_stdin, f"relay-stdin-{spec.execution_id}", proc, spec.stdin_text)
    _start_daemon(_wait_child, f"relay-wait-{spec.execution_id}", running, proc, on_exit)
    return running


def _start_daemon(target: Callable[..., None], name: str, *args: Any) -> None:
    threading.Thread(target=target, name=name, args=args, daemon=True).start()


def _feed_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    """Runs in its own thread: a big prompt could otherwise fill the pipe and deadlock us."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        try:
            proc.stdin.write(text.encode("utf-8"))
        finally:
            proc.stdin.close()


def _wait_child(
    running: RunningProcess,
    proc: subprocess.Popen[bytes],
    on_exit: Callable[[str], None] | None,
) -> None:
    proc.wait()
    running._mark_exited()
    if on_exit is None:
        return
    try:
        on_exit(running.execution_id)
    except Exception:
        log.exception("on_exit callback failed for %s", running.execution_id)


def _read_tail(path: Path, max_bytes: int) -> tuple[bytes, bool]:
    """Return (tail bytes, whether the tail starts at the beginning of the file)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            fh.seek(start)
            return fh.read(max_bytes), start == 0
    except FileNotFoundError:
        return b"", True


def clean_line(text: str) -> str:
    """Strip ANSI escapes and control/format characters so a line is safe to show in a TUI."""
    text = _ANSI_RE.sub("", text)
    return "".join(
        ch for ch in text if ch == " " or not unicodedata.category(ch).startswith(("C", "Z"))
    ).strip()


def last_line_of(path: Path, max_chars: int = 200) -> str:
    """Last non-empty printable line of a file, reading only its tail."""
    data, whole = _read_tail(path, _TAIL_BYTES)
    lines = data.decode("utf-8", errors="replace").splitlines()
    if not whole and lines:
        lines = lines[1:]  # first line of the tail is probably cut off mid-way
    for raw in reversed(lines):
        line = clean_line(raw)
        if line:
            return line[:max_chars]
    return ""


def process_start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def process_alive(pid: int, start_time: float | None) -> bool:
    """True if pid is running and is the same process that started at start_time.

    Comparing the create time tells a live engine from an unrelated process that reused a
    dead engine's pid. Zombies count as dead.
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return start_time is None or abs(created - start_time) <= 1.0


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a whole process group, tolerating one that is already gone.

    Refuses our own group and the special ids 0/1, which would signal the engine itself or
    everything we can reach.
    """
    if pgid <= 1 or pgid == os.getpgrp():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def write_artifact_text(artifact_dir: Path, name: str, text: str) -> Path:
    """Write atomically so a reader (TUI, restarted engine) never sees a half-written file."""
    artifact_dir.mkdir(parents=True, exist_ok=True)
    target = artifact_dir / name
    fd, tmp = tempfile.mkstemp(dir=artifact_dir, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def write_artifact_json(artifact_dir: Path, name: str, obj: Any) -> Path:
    return write_artifact_text(artifact_dir, name, json.dumps(obj, indent=2, sort_keys=True))
