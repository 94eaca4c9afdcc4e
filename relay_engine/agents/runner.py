"""Subprocess lifecycle for agent CLIs.

The child writes its stdout/stderr straight into files under the artifact directory, so an
agent that prints gigabytes or binary garbage never passes through engine memory.

Every agent runs under its own supervisor (:mod:`relay_engine.agents.supervisor`), in a session of
its own: the supervisor is a child subreaper, records itself on disk before the agent can
run, and takes the agent's whole tree down -- daemons and ``setsid`` grandchildren included
-- when the agent exits, when the engine says so (cancel, timeout), and when the engine
dies. Every process of an execution also carries ``RELAY_EXECUTION_ID`` in its
environment, which :func:`kill_execution` uses as the last resort.

The supervisor is the native one (``supervisor.c``, :mod:`relay_engine.agents.native`)
wherever it could be built, started with ``posix_spawn`` as the engine's own child; else
the Python one, forked by the engine's fork server, or started as a script.
"""

from __future__ import annotations

import array
import contextlib
import functools
import json
import logging
import os
import queue
import select
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

import psutil

from relay_engine.agents import native
from relay_engine.agents import supervisor as supervisor_script
from relay_engine.agents.supervisor import (
    RECORD_NAME,
    boot_id,
    live_start_ticks,
    proc_start_ticks,
)
from relay_engine.contracts.printable import strip_ansi

log = logging.getLogger(__name__)

STDOUT_NAME = "stdout.txt"
STDERR_NAME = "stderr.txt"
RESULT_NAME = "result.json"
AGENT_DIR = "agent"  # a sandboxed agent's only writable part of its artifact folder
_TAIL_BYTES = 8192
SUPERVISOR = str(Path(supervisor_script.__file__).resolve())
FORK_TAG_ROOM = 160  # forkserver.TAG_ROOM: room for a child's execution id in its environ
FORKSERVER = str(Path(supervisor_script.__file__).with_name("forkserver.py").resolve())
START_TIMEOUT_S = 30.0
FORCE_KILL_AFTER_S = 3.0  # beyond the grace: the supervisor itself did not answer
EXECUTION_ENV = "RELAY_EXECUTION_ID"
MAX_ARG_BYTES = 128 * 1024  # Linux MAX_ARG_STRLEN: the longest single argv element


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
    grace_s: float = 5.0  # what the supervisor gives the tree between TERM and KILL
    conversation: bool = False  # stdin stays open after stdin_text: see RunningProcess.send
    sandbox_argc: int = 0  # leading argv elements that are the sandbox's command (bwrap … --)
    result_name: str = RESULT_NAME  # where in artifact_dir the agent writes its result
    deadline_s: float | None = None  # the supervisor stops the agent unless extended by then
    fence_grace_s: float | None = None  # TERM to KILL when that deadline passes

    @property
    def agent_argv(self) -> list[str]:
        """The agent's own command, without the sandbox in front of it."""
        return self.argv[self.sandbox_argc :]


class RunningProcess:
    """Handle on a supervised agent; all reads go through the artifact files, never pipes.

    ``pid`` and ``pgid`` are the supervisor's (the agent shares its process group);
    ``agent_pid`` is the agent itself. Stopping goes through the supervisor, which stops the
    agent's whole tree, not just its group.
    """

    def __init__(
        self,
        spec: LaunchSpec,
        pid: int,
        started_at: float,
        control: socket.socket,
        stdin: IO[bytes] | None = None,
        own_child: bool = False,
    ):
        self.spec = spec
        self.own_child = own_child  # the engine reaps it (a native supervisor), not a server
        self.execution_id = spec.execution_id
        self.pid = pid
        self.pgid = pid  # a session of its own: the supervisor leads its own group
        self._agent_pid: int | None = None
        self._started = threading.Event()
        self.started_at = started_at
        self.ended_at: float | None = None
        self._returncode: int | None = None
        self._stdin_file = stdin
        self._control = control
        self._said = b""  # what the supervisor told us so far
        self._exited = threading.Event()
        self._stdout_offset = 0
        self._lock = threading.Lock()
        self._terminating = False
        self._kill_timer: threading.Timer | None = None
        self._stdin: queue.SimpleQueue[bytes | None] | None = None

    @property
    def agent_pid(self) -> int | None:
        """The agent's own pid, once its supervisor started it (None if it could not)."""
        self._started.wait(START_TIMEOUT_S)
        return self._agent_pid

    @functools.cached_property
    def stdout_path(self) -> Path:
        return self.spec.artifact_dir / STDOUT_NAME

    @functools.cached_property
    def stderr_path(self) -> Path:
        return self.spec.artifact_dir / STDERR_NAME

    @functools.cached_property
    def result_path(self) -> Path:
        return self.spec.artifact_dir / self.spec.result_name

    @property
    def returncode(self) -> int | None:
        return self._returncode if self._exited.is_set() else None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        self._exited.wait(timeout)
        return self.returncode

    def _mark_exited(self, returncode: int) -> None:
        self._returncode = returncode
        self.ended_at = time.time()
        self._exited.set()

    def read_new_stdout(self, max_bytes: int = 1 << 20) -> bytes:
        """Return stdout bytes appended since the previous call, capped so memory stays bounded."""
        with self._lock:
            try:
                if os.stat(self.stdout_path).st_size <= self._stdout_offset:
                    return b""  # nothing new: cheaper than opening it (200 agents, every tick)
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

    def send(self, data: bytes) -> bool:
        """Write to a conversing agent's stdin (an answer, the operator's words), in order,
        from a thread of its own so a slow reader never blocks the engine. False when its
        stdin is closed or was never open."""
        with self._lock:
            if self._stdin is None or self._exited.is_set():
                return False
            self._stdin.put(data)
            return True

    def close_stdin(self) -> None:
        """End the conversation: the CLI reads end-of-file once what was sent is written."""
        with self._lock:
            if self._stdin is not None:
                self._stdin.put(None)
                self._stdin = None

    @property
    def conversing(self) -> bool:
        return self._stdin is not None

    def terminate(self, grace_s: float = 5.0) -> None:
        """Stop the agent's tree: TERM now, KILL after ``grace_s``, without blocking.

        The supervisor does both; should it not answer, the engine kills the execution
        itself shortly after the grace period.
        """
        with self._lock:
            if self._terminating:
                return
            self._terminating = True
        self._command(f"term {max(grace_s, 0.0):g}" if grace_s > 0 else "kill")
        self._force_kill_after(grace_s + FORCE_KILL_AFTER_S)

    def extend_deadline(self, seconds: float) -> None:
        """Move the supervisor's deadline to ``seconds`` from now: called only after the
        engine renewed this execution's lease in the database, so an engine that cannot
        renew (paused, cut off) never keeps its agent running past its lease."""
        self._command(f"deadline {max(seconds, 0.0):.3f}")

    @property
    def fenced(self) -> bool:
        """Whether the supervisor stopped the agent at its deadline (known once exited)."""
        return b"fenced deadline" in self._said

    def kill_now(self) -> None:
        with self._lock:
            self._terminating = True
            timer = self._kill_timer
        if timer is not None:
            timer.cancel()
        self._command("kill")
        self._force_kill_after(FORCE_KILL_AFTER_S)

    def _command(self, line: str) -> None:
        if self._exited.is_set():
            return
        with contextlib.suppress(OSError):
            self._control.sendall(line.encode("ascii") + b"\n")

    def _force_kill_after(self, delay: float) -> None:
        timer = threading.Timer(delay, self._force_kill)
        timer.daemon = True
        with self._lock:
            self._kill_timer = timer
        timer.start()

    def _force_kill(self) -> None:
        if not self._exited.is_set():
            kill_execution(self.execution_id, self.pgid)

    def _handshake(self) -> None:
        """Read the supervisor's first line: the agent's pid, or why it could not start (the
        supervisor also writes that reason to stderr.txt, where the exit's judge finds it)."""
        try:
            self._control.settimeout(START_TIMEOUT_S)
            while b"\n" not in self._said:
                chunk = self._control.recv(4096)
                if not chunk:
                    break
                self._said += chunk
        except OSError:
            pass
        finally:
            self._note_start(True)

    def _note_start(self, final: bool = False) -> None:
        """Once the supervisor's first line is in (or, ``final``, never will be): the
        agent's pid, if it started, for :attr:`agent_pid`'s waiters."""
        if self._started.is_set() or (b"\n" not in self._said and not final):
            return
        first = self._said.split(b"\n", 1)[0].decode("utf-8", "replace")
        verb, _, rest = first.partition(" ")
        if verb == "started" and rest.isdigit():
            self._agent_pid = int(rest)
        self._started.set()

    def _said_how(self) -> bool:
        """Whether the supervisor said how its agent ended (else it was killed, and may
        have left a tree behind)."""
        return b"exit " in self._said or b"error " in self._said

    def _finish(self, timeout: float | None = 0.5) -> None:
        """The supervisor exited (``timeout`` None: read until it has, its socket's end of
        file): if it did not say how, it was killed and may have left a tree."""
        self._control.settimeout(timeout)
        while True:  # what arrived counts even if the socket then fails (see below)
            try:
                chunk = self._control.recv(4096)
            except OSError:  # a reset: it exited with our last commands unread
                break
            if not chunk:
                break
            self._said += chunk
        self._control.close()
        if not self._said_how():
            kill_execution(self.execution_id, self.pgid)

    def _said_code(self) -> int:
        """The agent's exit status as its supervisor told it (a forked supervisor is not
        ours to wait for): ``exit N``; 127 when the agent could not start; killed (-9) when
        the supervisor died without a word."""
        for line in reversed(self._said.split(b"\n")):
            verb, _, rest = line.decode("utf-8", "replace").partition(" ")
            if verb == "exit" and rest.lstrip("-").isdigit():
                return int(rest)
            if verb == "error":
                return 127
        return -signal.SIGKILL


def supervisor_options(
    spec: LaunchSpec, control_fd: int, executable: str | None = None
) -> list[str]:
    """The supervisor's command line after its program, which the native supervisor, the
    Python one as a script and (as a dict) the fork server's children all take."""
    return [
        "--control",
        str(control_fd),
        "--record",
        str(spec.artifact_dir / RECORD_NAME),
        "--grace",
        f"{spec.grace_s:g}",
        "--wrapped",
        "1" if spec.sandbox_argc else "0",
        *(() if spec.deadline_s is None else ("--deadline", f"{max(spec.deadline_s, 0.0):.3f}")),
        *(() if spec.fence_grace_s is None else ("--fence-grace", f"{spec.fence_grace_s:g}")),
        "--cwd",
        str(spec.cwd),
        *(("--exe", executable) if executable else ()),
        "--",
        *spec.argv,
    ]


def supervisor_argv(spec: LaunchSpec, control_fd: int, executable: str | None = None) -> list[str]:
    """The Python supervisor started as a script."""
    return [
        sys.executable,
        "-I",
        "-S",
        SUPERVISOR,
        *supervisor_options(spec, control_fd, executable),
    ]


SUPERVISOR_MODE_ENV = native.MODE_ENV  # "native" (the default), "fork" or "exec"
CONTROL_FD = 3  # where a native supervisor finds its end of the control socket
NATIVE_ARGV0 = "relay-supervisor"  # what ps shows for a native supervisor
RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them; agents must not


def launch(spec: LaunchSpec, on_exit: Callable[[str], None] | None = None) -> RunningProcess:
    """Start spec.argv under its supervisor, with output going straight to disk.

    Returns at once: the supervisor records itself and starts the agent on its own. What
    keeps an agent from starting at all (not installed, not executable, an argument the
    kernel refuses) raises :class:`LaunchError` here; a rarer failure of the exec itself
    ends the run with exit code 127 and the reason in stderr.txt. on_exit(execution_id) is
    called from a daemon thread as soon as the supervisor is reaped.
    """
    if not spec.argv:
        raise LaunchError(f"execution {spec.execution_id}: empty argv")
    executable = _check_argv(spec)
    if not os.path.isdir(spec.artifact_dir):  # build_launch made it: one stat, not a mkdir
        spec.artifact_dir.mkdir(parents=True, exist_ok=True)
    engine_end, supervisor_end = socket.socketpair()
    try:
        started = _start_supervisor(spec, supervisor_end.fileno(), executable)
    except BaseException:
        engine_end.close()
        raise
    finally:
        supervisor_end.close()
    running = RunningProcess(
        spec, started.pid, time.time(), engine_end, started.stdin, started.own_child
    )
    if spec.conversation:
        running._stdin = _start_conversation(running, spec)
    elif spec.stdin_text is not None:
        _start_daemon(_feed_stdin, f"relay-stdin-{spec.execution_id}", running, spec.stdin_text)
    if started.proc is None:
        _watcher().watch(running, on_exit)
    else:
        name = f"relay-wait-{spec.execution_id}"
        _start_daemon(_wait_child, name, running, started.proc, on_exit)
    return running


class _Started(NamedTuple):
    pid: int
    stdin: IO[bytes] | None  # the agent's stdin, when relay writes to it
    proc: subprocess.Popen[bytes] | None = None  # a script supervisor: a thread waits for it
    own_child: bool = False  # a native supervisor: the watcher reaps it


def _start_supervisor(spec: LaunchSpec, control_fd: int, executable: str | None = None) -> _Started:
    """The native supervisor where it could be built (the default); else one forked by the
    engine's fork server; else (``RELAY_SUPERVISOR=exec``, or no server) one started as a
    script. ``executable`` is where ``argv[0]`` was found, which the supervisor execs as is."""
    mode = native.mode()
    if mode == "native" and (binary := native.native_supervisor().binary) is not None:
        started = _spawn_native(binary, spec, control_fd, executable)
        if started is not None:
            return started
    server = fork_server() if mode != "exec" else None
    if server is not None:
        try:
            return _Started(*server.spawn(spec, control_fd, executable))
        except ForkServerGone:
            log.warning("the fork server is gone: starting this supervisor as a script")
    proc, stdin = _spawn_supervisor(spec, control_fd, executable)
    return _Started(proc.pid, stdin, proc)


def _spawn_native(
    binary: str, spec: LaunchSpec, control_fd: int, executable: str | None
) -> _Started | None:
    """Start the native supervisor with ``posix_spawn`` (a vfork and an exec: no thread, no
    round trip to a server) in a session of its own, with the agent's stdio and the control
    socket at :data:`CONTROL_FD`. Its environment is the agent's with the execution's tag,
    which ``/proc/PID/environ`` shows to recovery's sweep. None when the binary is gone (a
    cache cleaned under a running engine): the next start builds it again."""
    argv = [NATIVE_ARGV0, *supervisor_options(spec, CONTROL_FD, executable)]
    env = {**spec.env, EXECUTION_ENV: spec.execution_id}
    with _Stdio.open(spec) as stdio:
        targets = (*stdio.fds, control_fd)  # to 0, 1, 2 and CONTROL_FD, in that order
        actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(targets)]
        try:
            pid = os.posix_spawn(
                binary, argv, env, file_actions=actions, setsid=True, setsigdef=RESTORED_SIGNALS
            )
        except OSError as error:
            if os.access(binary, os.X_OK):
                raise _launch_error(spec, error) from error
            stdio.abandon()
            log.warning("the native supervisor is gone (%s): building it again", error)
            native.forget()
            return None
    return _Started(pid, stdio.writer, own_child=True)


def _check_argv(spec: LaunchSpec) -> str | None:
    """Refuse what could never start, with what to do about it, before spawning anything;
    the absolute path ``argv[0]`` was found at (None where it is not absolute), which spares
    the supervisor a search of its own."""
    found = [
        _check_executable(spec, exe) for exe in dict.fromkeys((spec.argv[0], *spec.agent_argv[:1]))
    ]
    longest = max(len(arg.encode("utf-8", "surrogateescape")) for arg in spec.argv)
    if longest > MAX_ARG_BYTES:
        raise LaunchError(
            f"cannot start {spec.agent_argv[0]!r}: one argument is {longest // 1024} KiB, over the "
            f"{MAX_ARG_BYTES // 1024} KiB Linux allows; pass the prompt as a file "
            "({prompt_file}) or on stdin instead of {prompt}, or shorten the task input"
        )
    return found[0] if os.path.isabs(found[0]) else None


def _check_executable(spec: LaunchSpec, exe: str) -> str:
    """Where ``exe`` is (on the agent's PATH, or relative to its cwd), or LaunchError."""
    if "/" in exe:
        path = exe if os.path.isabs(exe) else str(spec.cwd / exe)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        path = shutil.which(exe, path=spec.env.get("PATH", os.defpath)) or ""
        found = bool(path)
    if not found:
        raise LaunchError(
            f"cannot start {exe!r} (cwd {spec.cwd}): "
            + ("not an executable file" if "/" in exe else "not found on PATH")
        )
    return path


def _spawn_supervisor(
    spec: LaunchSpec, control_fd: int, executable: str | None = None
) -> tuple[subprocess.Popen[bytes], IO[bytes] | None]:
    """The Python supervisor started as a script: (its Popen, the agent's stdin when relay
    writes to it)."""
    with _Stdio.open(spec) as stdio:
        stdin, stdout, stderr = stdio.fds
        try:
            proc = subprocess.Popen(
                supervisor_argv(spec, control_fd, executable),
                cwd=spec.cwd,
                env={**spec.env, EXECUTION_ENV: spec.execution_id},
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                close_fds=True,
                pass_fds=(control_fd,),
            )
        except OSError as exc:
            raise _launch_error(spec, exc) from exc
    return proc, stdio.writer


def _launch_error(spec: LaunchSpec, error: OSError) -> LaunchError:
    """A supervisor that could not be started at all, which the agent is not either."""
    return LaunchError(f"cannot start {spec.argv[0]!r} (cwd {spec.cwd}): {error}")


def _start_daemon(target: Callable[..., None], name: str, *args: Any) -> None:
    threading.Thread(target=target, name=name, args=args, daemon=True).start()


def _feed_stdin(running: RunningProcess, text: str) -> None:
    """Runs in its own thread: a big prompt could otherwise fill the pipe and deadlock us."""
    stdin = running._stdin_file
    assert stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        try:
            stdin.write(text.encode("utf-8"))
        finally:
            stdin.close()


def _start_conversation(
    running: RunningProcess, spec: LaunchSpec
) -> queue.SimpleQueue[bytes | None]:
    pending: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    if spec.stdin_text is not None:
        pending.put(spec.stdin_text.encode("utf-8"))
    name = f"relay-stdin-{spec.execution_id}"
    _start_daemon(_converse, name, running, pending)
    return pending


def _converse(running: RunningProcess, pending: queue.SimpleQueue[bytes | None]) -> None:
    """Runs in its own thread: writes what the engine sends until told to close (None)."""
    stdin = running._stdin_file
    assert stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        try:
            while (data := pending.get()) is not None:
                stdin.write(data)
                stdin.flush()
        finally:
            stdin.close()


def _wait_child(
    running: RunningProcess,
    proc: subprocess.Popen[bytes] | None,
    on_exit: Callable[[str], None] | None,
) -> None:
    """Until the supervisor is gone: our child (``proc``) is waited for; a forked one is
    gone when its control socket reaches end-of-file, having said how its agent ended."""
    running._handshake()
    if proc is not None:
        proc.wait()
        running.close_stdin()  # ends its writer thread
        running._finish()
        code = proc.returncode
    else:
        running._finish(timeout=None)
        running.close_stdin()
        code = running._said_code()
        _until_gone(running.pid)
    _report_exit(running, code, on_exit)


def _report_exit(running: RunningProcess, code: int, on_exit: Callable[[str], None] | None) -> None:
    running._mark_exited(code)
    if on_exit is None:
        return
    try:
        on_exit(running.execution_id)
    except Exception:
        log.exception("on_exit callback failed for %s", running.execution_id)


def _until_gone(pid: int, timeout: float = 2.0) -> None:
    """A supervisor's descriptors close a moment before it is gone: wait out that moment,
    so an exit reported means a process that no longer runs.

    A pidfd turns readable when its process has exited (a zombie: the fork server reaps
    it), so this is one wait, not a poll of /proc every 2 ms (each poll cost more CPU than
    the rest of the exit's report). A pid the server has reaped already is gone: the open
    fails (one reused in that instant would be waited on up to ``timeout``, as the poll
    this replaced would have)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # exited and reaped already
    except (AttributeError, OSError):  # no pidfds (before Linux 5.3): poll
        deadline = time.monotonic() + timeout
        while process_alive(pid, None) and time.monotonic() < deadline:
            time.sleep(0.002)
        return
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)


class _Watcher:
    """The one thread that follows every native or forked supervisor of this process.

    A thread per agent cost a thread's start and end per start (about 0.1 ms of CPU, and
    its wake-ups). All there is to follow is a supervisor's control socket (what it says,
    then end-of-file) and then its pidfd (it has exited), so one epoll set follows them
    all; a native supervisor is the engine's own child, reaped here then (``waitpid`` of
    its pid, never of -1: the engine has other children). Nothing here blocks: a
    supervisor that died without a word gets its tree killed from a thread of its own."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._added: queue.SimpleQueue[tuple[RunningProcess, Callable[[str], None] | None]]
        self._added = queue.SimpleQueue()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        _start_daemon(self._run, "relay-supervisors")

    def watch(self, running: RunningProcess, on_exit: Callable[[str], None] | None) -> None:
        self._added.put((running, on_exit))
        self._wake_w.send(b"\0")

    def _run(self) -> None:
        while True:
            for key, _ in self._selector.select():
                try:
                    self._take_new() if key.data is None else key.data()
                except Exception:
                    log.exception("following a supervisor failed")

    def _take_new(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._wake_r.recv(4096)
        while not self._added.empty():
            running, on_exit = self._added.get_nowait()
            follow = functools.partial(self._readable, running, on_exit)
            self._selector.register(running._control, selectors.EVENT_READ, follow)

    def _readable(self, running: RunningProcess, on_exit: Callable[[str], None] | None) -> None:
        """What the supervisor said; at end-of-file (or a reset: it exited with our last
        commands unread) it is gone but for the moment its pidfd waits out."""
        try:
            chunk = running._control.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            running._said += chunk
            running._note_start()
            return
        self._selector.unregister(running._control)
        running._control.close()
        running._note_start(True)
        running.close_stdin()
        if running.own_child:
            self._after_exit(running, functools.partial(self._reaped, running, on_exit))
            return
        code = running._said_code()
        if not running._said_how():  # killed: its tree may be left, which takes a while
            _start_daemon(_killed, f"relay-killed-{running.execution_id}", running, on_exit)
            return
        self._after_exit(running, functools.partial(_report_exit, running, code, on_exit))

    def _after_exit(self, running: RunningProcess, then: Callable[[], None]) -> None:
        """Call ``then`` once the supervisor has exited, as its pidfd says (one that the
        fork server reaped already has; without pidfds a thread waits)."""
        try:
            pidfd = os.pidfd_open(running.pid)
        except ProcessLookupError:
            then()
            return
        except (AttributeError, OSError):
            _start_daemon(_gone_then, "relay-gone", running.pid, then)
            return
        gone = functools.partial(self._gone, pidfd, then)
        self._selector.register(pidfd, selectors.EVENT_READ, gone)

    def _gone(self, pidfd: int, then: Callable[[], None]) -> None:
        self._selector.unregister(pidfd)
        os.close(pidfd)
        then()

    def _reaped(self, running: RunningProcess, on_exit: Callable[[str], None] | None) -> None:
        """Our own (native) supervisor exited: reap it, and report its status; one that died
        without a word was killed, and its tree is killed first, from a thread of its own."""
        try:
            _, status = os.waitpid(running.pid, 0)  # it has exited: this does not wait
            code = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # something else waited for it
            code = running._said_code()
        if running._said_how():
            _report_exit(running, code, on_exit)
        else:
            name = f"relay-killed-{running.execution_id}"
            _start_daemon(_killed, name, running, on_exit, code)


def _killed(
    running: RunningProcess, on_exit: Callable[[str], None] | None, code: int | None = None
) -> None:
    """A supervisor that died without a word was killed, and may have left its agent's
    tree: kill that, then report (``code``: it was reaped already; else once it is gone)."""
    kill_execution(running.execution_id, running.pgid)
    if code is None:
        _gone_then_report(running, running._said_code(), on_exit)
    else:
        _report_exit(running, code, on_exit)


def _gone_then(pid: int, then: Callable[[], None]) -> None:
    _until_gone(pid)
    then()


def _gone_then_report(
    running: RunningProcess, code: int, on_exit: Callable[[str], None] | None
) -> None:
    _gone_then(running.pid, functools.partial(_report_exit, running, code, on_exit))


_watchers: list[_Watcher] = []


def _watcher() -> _Watcher:
    with _server_lock:
        if not _watchers:
            _watchers.append(_Watcher())
        return _watchers[0]


def cap_file(path: Path, max_bytes: int) -> int:
    """Cut a finished agent's output file to ``max_bytes``: its first and last halves, with
    a line in between saying what was cut. Returns the bytes cut (0: it was small enough).

    The file is rewritten in place through a copy of its tail, so memory stays bounded
    whatever the file's size."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if size <= max_bytes:
        return 0
    half = max_bytes // 2
    cut = size - 2 * half
    marker = f"\n[relay: {cut:,} bytes cut here: max_artifact_bytes = {max_bytes:,}]\n".encode()
    with open(path, "r+b") as fh:
        fh.seek(size - half)
        tail = fh.read(half)
        fh.seek(half)
        fh.write(marker)
        fh.write(tail)
        fh.truncate()
    return cut


_OUTPUT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
_devnull: list[int] = []  # one /dev/null per process, every agent's stdin that reads none
_devnull_opening = threading.Lock()


def _devnull_fd() -> int:
    """The process's one /dev/null, opened by the first start: under a lock, as the spawn
    threads start agents side by side and a second one opened would never be closed."""
    with _devnull_opening:
        if not _devnull:
            _devnull.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        return _devnull[0]


@dataclass
class _Stdio:
    """An agent's stdin, stdout and stderr as bare descriptors, for a supervisor to get
    copies of (no io objects to build and tear down per start): output straight into its
    artifact files; stdin the process's one /dev/null, or a pipe when relay writes to it.
    Every way of starting a supervisor opens them ``with`` it: they are closed once the
    supervisor has its copies, and relay's end of the stdin pipe too when it got none."""

    fds: tuple[int, int, int]
    writer: IO[bytes] | None  # the pipe's end relay writes the agent's stdin to
    owned: list[int]  # closed once the supervisor has its copies

    @classmethod
    def open(cls, spec: LaunchSpec) -> _Stdio:
        owned: list[int] = []
        try:
            for name in (STDOUT_NAME, STDERR_NAME):
                owned.append(os.open(spec.artifact_dir / name, _OUTPUT_FLAGS, 0o666))
            stdin, writer = _devnull_fd(), None
            if spec.stdin_text is not None or spec.conversation:
                stdin, write_end = os.pipe()
                owned.append(stdin)
                writer = os.fdopen(write_end, "wb")
        except BaseException:
            for fd in owned:
                os.close(fd)
            raise
        return cls((stdin, owned[0], owned[1]), writer, owned)

    def __enter__(self) -> _Stdio:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        for fd in self.owned:
            os.close(fd)
        if kind is not None:
            self.abandon()

    def abandon(self) -> None:
        """No supervisor got them: relay's end of the stdin pipe goes too."""
        if self.writer is not None:
            self.writer.close()


class ForkServerGone(RuntimeError):
    """The fork server died or would not answer: start supervisors as scripts instead."""


class ForkServer:
    """The engine's warm supervisor factory (:mod:`relay_engine.agents.forkserver`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", FORKSERVER, "--socket", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env={**os.environ, EXECUTION_ENV: "x" * FORK_TAG_ROOM},  # each child's own tag
                start_new_session=True,  # a Ctrl-C of the engine's terminal is the engine's
            )
        finally:
            theirs.close()
        self._said = b""

    def alive(self) -> bool:
        return self._proc.poll() is None

    def spawn(
        self, spec: LaunchSpec, control_fd: int, executable: str | None = None
    ) -> tuple[int, IO[bytes] | None]:
        """Fork a supervisor for ``spec`` with output straight to its artifact files:
        (its pid, the agent's stdin when relay writes to it)."""
        with _Stdio.open(spec) as stdio:
            pid = self._ask(_fork_request(spec, executable), [*stdio.fds, control_fd])
        return pid, stdio.writer

    def _ask(self, request: dict[str, Any], fds: list[int]) -> int:
        body = json.dumps(request).encode("utf-8", "surrogateescape")
        payload = len(body).to_bytes(8, "big") + body
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        with self._lock:
            try:
                sent = self._conn.sendmsg([payload], rights)
                if sent < len(payload):
                    self._conn.sendall(payload[sent:])
                while b"\n" not in self._said:
                    chunk = self._conn.recv(4096)
                    if not chunk:
                        raise ForkServerGone("the fork server closed its socket")
                    self._said += chunk
            except OSError as error:
                raise ForkServerGone(str(error)) from error
            line, self._said = self._said.split(b"\n", 1)
        verb, _, rest = line.decode("utf-8", "replace").partition(" ")
        if verb != "pid":
            raise LaunchError(f"cannot start {request['argv'][0]!r}: {rest}")
        return int(rest)

    def close(self) -> None:
        self._conn.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(5)


def _fork_request(spec: LaunchSpec, executable: str | None = None) -> dict[str, Any]:
    """The fork server's request (``forkserver.Request``): the supervisor's options as a
    dict, its control descriptor filled in by the server."""
    options = supervisor_options(spec, 0, executable)
    split = options.index("--")
    return {
        "argv": spec.argv,
        "env": {**spec.env, EXECUTION_ENV: spec.execution_id},
        "options": dict(zip(options[:split:2], options[1:split:2], strict=True)),
    }


_server: list[ForkServer] = []
_server_lock = threading.Lock()


def fork_server() -> ForkServer | None:
    """This process's fork server, started on first use and again should it have died;
    None where it cannot run (not Linux, or it failed to start)."""
    if not sys.platform.startswith("linux"):
        return None
    with _server_lock:
        if _server and _server[0].alive():
            return _server[0]
        if _server:
            _server.pop().close()
        try:
            _server.append(ForkServer())
        except OSError as error:
            log.warning("no fork server (%s): supervisors start as scripts", error)
            return None
        return _server[0]


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
    text = strip_ansi(text)
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


WALL_START_SLACK_S = 2.0
"""How far two readings of one process's wall-clock start may differ: the kernel gives the
boot time as whole seconds of the clock now, so a clock being slewed steps it by one."""


def process_start_time(pid: int) -> float | None:
    """When pid started, or None when no live process has it: zombies count as dead."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def process_alive(pid: int, start_time: float | None) -> bool:
    """True if pid is running and is the same process that started at start_time.

    Comparing the create time tells a live engine from an unrelated process that reused a
    dead engine's pid.
    """
    created = process_start_time(pid)
    if created is None:
        return False
    return start_time is None or abs(created - start_time) < WALL_START_SLACK_S


def same_process(pid: int, start_ticks: int | None, start_time: float | None) -> bool:
    """Whether ``pid`` is still the live process recorded: by its start in clock ticks since
    boot when the record has it, which no clock change moves; else by its wall-clock start."""
    if start_ticks is not None:
        return live_start_ticks(pid) == start_ticks
    return process_alive(pid, start_time)


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a whole process group, tolerating one that is already gone.

    Refuses our own group and the special ids 0/1, which would signal the engine itself or
    everything we can reach.
    """
    if pgid <= 1 or pgid == os.getpgrp():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def read_record(artifact_dir: Path) -> dict[str, Any] | None:
    """The supervisor's on-disk record of an execution, or None when there is none."""
    try:
        record = json.loads((artifact_dir / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def recorded_group(record: dict[str, Any] | None) -> int | None:
    """The recorded process group, only while its supervisor is the very process recorded.

    A pid alone may have been reused since; the boot id and the start time in clock ticks
    make sure relay never signals a stranger.
    """
    if not record or record.get("boot_id") != boot_id():
        return None
    pid = record.get("supervisor_pid")
    if not isinstance(pid, int) or proc_start_ticks(pid) != record.get("start_ticks"):
        return None
    pgid = record.get("pgid")
    return pgid if isinstance(pgid, int) else None


def tagged_processes(execution_id: str) -> list[int]:
    """Processes whose environment says they belong to this execution (never this one)."""
    tag = f"\0{EXECUTION_ENV}={execution_id}\0".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = b"\0" + fh.read() + b"\0"
        except OSError:
            continue
        if tag in environ:
            found.append(int(name))
    return found


def kill_execution(execution_id: str, pgid: int | None = None, rounds: int = 20) -> int:
    """SIGKILL everything left of an execution: its group, then every process tagged with it.

    The tag sweep finds what escaped the group (``setsid`` daemons) even when the supervisor
    that would have reaped them is gone. Returns how many processes were signalled.
    """
    if pgid:
        kill_process_group(pgid, signal.SIGKILL)
    killed = 0
    for _ in range(rounds):
        pids = tagged_processes(execution_id)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.01)
    return killed


def read_agent_file(path: Path, max_bytes: int) -> str | None:
    """A file the agent wrote, read the way nothing the agent planted can redirect: a symlink
    (to a secret of the host's), a FIFO (that never ends) or a huge file all read as None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        return handle.read(max_bytes + 1)[:max_bytes].decode("utf-8", errors="replace")


def write_artifact_text(artifact_dir: Path, name: str, text: str) -> Path:
    """Write atomically so a reader (TUI, restarted engine) never sees a half-written file:
    staged under a name of this thread's own beside it, then renamed over it. Not
    ``tempfile.mkstemp``, whose random names cost more CPU than the write: every start
    writes two of these. The folder is made only when it is not there yet."""
    target = artifact_dir / name
    staged = f"{artifact_dir}{os.sep}.{name}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        fd = os.open(staged, _STAGED_FLAGS, 0o600)
    except FileNotFoundError:
        artifact_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(staged, _STAGED_FLAGS, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        os.replace(staged, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        raise
    return target


_STAGED_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


def write_artifact_json(artifact_dir: Path, name: str, obj: Any) -> Path:
    """On one line: with an indent, ``json`` leaves its C encoder for the Python one, and
    every start wrote its packet that way for a third of its file-writing CPU (``jq .``
    still reads it laid out)."""
    return write_artifact_text(artifact_dir, name, json.dumps(obj, sort_keys=True))
