"""The per-execution supervisor: parent of one agent, reaper of everything the agent starts.

This is the readable spec of the supervisor and the fallback where no C compiler is at hand:
the engine normally starts ``supervisor.c``, which does exactly what this file does, with the
same command line (:mod:`relay_engine.agents.native` builds it). This one is forked by the
engine's fork server, or run as a script (``python -I -S supervisor.py …``, standard library
only), in a session of its own. It

1. makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): any process the
   agent starts that outlives its own parent -- a daemon that double-forks, a ``setsid``
   grandchild -- is re-parented to the supervisor instead of to init, so it can always be
   found by walking the supervisor's descendants;
2. writes its on-disk record (pid, process group, start time, boot id) *before* the agent
   can run, so whoever recovers the execution knows what to kill even if the engine died
   before it recorded anything in the database;
3. starts the agent and waits for it, watching a socket shared with its engine: a command
   (``term <grace>`` / ``kill``) stops the agent's whole tree, and end-of-file -- the
   engine died, whatever the instant -- does the same;
4. holds a *deadline* (``--deadline S``, moved on by ``deadline S`` from the engine after
   each lease renewal it made): a deadline that passes unextended means the engine could not
   renew its lease (it is paused, or cut off from its database), so the agent is stopped
   (TERM, KILL after ``--fence-grace``) and the record says so, before the lease expires and
   another engine may run the task again;
5. when the agent exits, stops every descendant still running, then exits with the agent's
   status (re-raising the signal that killed it), after telling the engine ``exit <code>``.

A sandboxed agent's argv starts with ``bwrap``, which dies of a TERM without passing it on
(and takes the agent with it, graceless): with ``--wrapped 1`` the TERM of a stop skips that
direct child, reaches the agent inside, and bwrap exits when the agent does. KILL still
takes everything.

Without ``prctl`` (not Linux) it still supervises the agent and its process group.
"""

from __future__ import annotations

import os
import select
import sys
import time

TYPE_CHECKING = False  # not typing's: this script does not import typing (see below)
if TYPE_CHECKING:  # typeshed has no stubs for _signal, which signal re-exports
    import ctypes
    import signal
    from collections.abc import Mapping

    Environ = Mapping[str, str]
else:
    import _signal as signal  # the C module: ``signal`` would import enum, 4 ms of each start

# Only modules Python has loaded anyway, plus select, _signal and (for prctl) ctypes: this
# script starts once per agent, so every import is paid for on every task.

PR_SET_CHILD_SUBREAPER = 36
RECORD_NAME = "process.json"
LEFTOVER_GRACE_S = 0.5  # a daemon left behind by an agent that exited gets this long after TERM
SETTLE_S = 0.05  # how long children get to exit by themselves before the sweep signals them
KILL_ROUNDS = 50
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


_libc: list[ctypes.CDLL] = []  # the C library, loaded once (a fork server loads it before forking)


def load_libc() -> ctypes.CDLL | None:
    """``ctypes``' handle on the C library (for ``prctl``), or None off Linux."""
    if not _libc and sys.platform.startswith("linux"):
        try:
            import ctypes

            _libc.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            return None
    return _libc[0] if _libc else None


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux >= 3.4); False where the kernel offers no such thing.

    A fork server calls :func:`load_libc` (which looks ``prctl`` up) before it forks, so a
    forked supervisor's call is one foreign call, not a symbol lookup and new objects."""
    libc = load_libc()
    try:
        return libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except AttributeError:
        return False


def _read_small(path: str) -> bytes:
    """A small file (under /proc) in one read: ``open()`` would build an io object stack,
    which a forked supervisor pays for in copied pages as well as in time."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


_host: list[tuple[str, str]] = []  # (boot id, host name): read once per process, not per start


def host_facts() -> tuple[str, str]:
    """This boot's id and this host's name, for the record; the same for every supervisor a
    fork server forks, so it reads them once, before forking."""
    if not _host:
        try:
            boot = _read_small("/proc/sys/kernel/random/boot_id").decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            boot = ""
        _host.append((boot, os.uname().nodename))
    return _host[0]


def boot_id() -> str:
    return host_facts()[0]


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (which may hold spaces)."""
    try:
        raw = _read_small(f"/proc/{pid}/stat")
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def proc_start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot: with the pid, a process's identity."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def live_start_ticks(pid: int) -> int | None:
    """:func:`proc_start_ticks` of a process that has not exited (a zombie has)."""
    fields = _stat_fields(pid)
    if not fields or len(fields) <= 19 or fields[0] == "Z":
        return None
    return int(fields[19])


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (non-zombie) process we can see."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields and len(fields) > 1 and fields[0] != "Z":
            parents[int(name)] = int(fields[1])
    return parents


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, grandchildren, …), parents first."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found.extend(below)
        frontier.extend(below)
    return found


def _json(value: str | int | bool | None) -> str:
    """JSON for the record's plain values (importing ``json`` would cost more than this)."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + "".join(c if c >= " " else f"\\u{ord(c):04x}" for c in escaped) + '"'
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return str(int(value))


def write_record(
    path: str, record: dict[str, str | int | bool | None], first: bool = False
) -> None:
    """Atomically (a temporary file renamed over it), so a reader never sees half a record.

    The ``first`` record is instead created in place, with one ``write``: a rename is the
    costliest step of a start on a busy file system. A reader that found it half-written
    would take it for none and fall back on the execution's tag, which loses nothing, for
    the agent cannot have started before the write returned."""
    body = (
        "{" + ", ".join(f"{_json(key)}: {_json(value)}" for key, value in record.items()) + "}"
    ).encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    if first:
        try:
            fd = os.open(path, flags | os.O_EXCL, 0o644)
        except FileExistsError:
            first = False
    if not first:
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, flags | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)
    if not first:
        os.replace(tmp, path)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:  # noqa: SIM105 - importing contextlib would slow every start
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Supervisor:
    """One agent's lifetime: start it, stop its tree on request, at its deadline or on
    engine death, reap it."""

    def __init__(
        self,
        control: int,
        grace_s: float,
        wrapped: bool = False,
        deadline_s: float | None = None,
        fence_grace_s: float | None = None,
    ) -> None:
        self.control: int | None = control
        self.grace_s = grace_s
        self.wrapped = wrapped
        self.deadline_at = None if deadline_s is None else time.monotonic() + deadline_s
        self.fence_grace_s = grace_s if fence_grace_s is None else fence_grace_s
        self.record_path: str | None = None
        self.record: dict[str, str | int | bool | None] = {}
        self.fenced = False
        self.agent_pid = 0
        self.agent_status: int | None = None
        self.kill_at: float | None = None
        self._signals: list[int] = []
        self._buffer = b""
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for sig in (*_STOP_SIGNALS, signal.SIGCHLD, signal.SIGUSR1):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._signals.append(signum)

    def tell(self, line: str) -> None:
        if self.control is None:
            return
        try:  # noqa: SIM105
            os.write(self.control, (line + "\n").encode("utf-8", "replace"))
        except OSError:
            pass

    def engine_gone(self) -> bool:
        """True once the engine closed its end of the socket (it exited or was killed)."""
        if self.control is None:
            return True
        ready, _, _ = select.select([self.control], [], [], 0)
        return bool(ready) and self._read_commands()

    def start(
        self, argv: list[str], env: Environ, executable: str | None = None, cwd: str | None = None
    ) -> bool:
        """Spawn the agent in ``cwd`` (``posix_spawn``: no ``subprocess`` import, which
        would double this script's start-up time); only stdin, stdout and stderr are
        inherited, and SIGPIPE and SIGXFSZ are at their defaults again (as ``subprocess``
        restores them: Python ignores SIGPIPE, and an agent would inherit that).

        ``executable`` is ``argv[0]`` as the engine found it on the agent's PATH, which
        spares the search (a failed ``execve`` per directory before it); without it the
        search uses this process's PATH, which a script supervisor shares with its agent."""
        if self.control is not None:
            os.set_inheritable(self.control, False)
        restored = (signal.SIGPIPE, signal.SIGXFSZ)
        try:
            if cwd:
                os.chdir(cwd)
        except OSError as error:
            return self._not_started(f"cannot start {argv[0]!r} (cwd {cwd}): {error.strerror}")
        try:
            if executable:
                self.agent_pid = os.posix_spawn(executable, argv, env, setsigdef=restored)
            else:
                self.agent_pid = os.posix_spawnp(argv[0], argv, env, setsigdef=restored)
        except OSError as error:
            return self._not_started(f"cannot start {argv[0]!r}: {error.strerror or error}")
        self.tell(f"started {self.agent_pid}")
        return True

    def _not_started(self, reason: str) -> bool:
        self.tell(f"error {reason}")
        os.write(2, f"relay: {reason}\n".encode("utf-8", "replace"))  # for the exit's judge
        return False

    def _timeout(self) -> float | None:
        """How long the wait may sleep: until the next KILL or the deadline, if any."""
        instants = [t for t in (self.kill_at, self.deadline_at) if t is not None]
        return max(0.0, min(instants) - time.monotonic()) if instants else None

    def run(self) -> int:
        """Wait for the agent while obeying the engine; returns its wait status code."""
        while self.agent_status is None:
            timeout = self._timeout()
            watched = [self._wake_r] + ([self.control] if self.control is not None else [])
            ready, _, _ = select.select(watched, [], [], timeout)
            if self._wake_r in ready:
                os.read(self._wake_r, 512)
            if self.control is not None and self.control in ready and self._read_commands():
                self.stop(self.grace_s)  # the engine is gone: so is its work
            self._handle_signals()
            if self.deadline_at is not None and time.monotonic() >= self.deadline_at:
                self.fence()
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                self.kill_tree()
            self.reap()
        self.sweep()
        return self.agent_status

    def _read_commands(self) -> bool:
        """Apply the engine's commands; True on end-of-file (the engine is gone)."""
        assert self.control is not None
        try:
            data = os.read(self.control, 4096)
        except OSError:
            data = b""
        if not data:
            self.control = None
            return True
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            verb, _, arg = line.decode("utf-8", "replace").partition(" ")
            if verb == "deadline" and not self.fenced:
                self.deadline_at = time.monotonic() + float(arg)
            elif verb == "term":
                self.stop(float(arg or self.grace_s))
            elif verb == "kill":
                self.kill_tree()
        return False

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.pop(0)
            if signum == signal.SIGUSR1:
                self.kill_tree()
            elif signum in _STOP_SIGNALS:
                self.stop(self.grace_s)

    def fence(self) -> None:
        """The deadline passed unextended: the engine may have lost the task's lease, so the
        agent stops now, well before another engine may claim the task. The record says why
        (recovery and the operator read it), and so does the engine's socket."""
        self.deadline_at = None
        self.fenced = True
        if self.record_path is not None:
            self.record.update(stopped="deadline", stopped_at=int(time.time()))
            try:  # noqa: SIM105
                write_record(self.record_path, self.record)
            except OSError:
                pass
        self.tell("fenced deadline")
        self.stop(self.fence_grace_s)

    def stop(self, grace_s: float) -> None:
        """TERM the whole tree now, KILL whatever is left after ``grace_s``."""
        if grace_s <= 0:
            self.kill_tree()
            return
        tree = descendants(os.getpid())
        if self.wrapped:
            tree = [pid for pid in tree if pid != self.agent_pid]
        _signal_all(tree, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)

    def kill_tree(self) -> None:
        """SIGKILL every descendant, again and again until none is left (they may fork)."""
        self.kill_at = time.monotonic() + 0.2
        for _ in range(KILL_ROUNDS):
            pids = descendants(os.getpid())
            if not pids:
                return
            _signal_all(pids, signal.SIGKILL)
            self.reap()
            time.sleep(0.005)

    def has_children(self) -> bool:
        """Whether any process is still below us. A subreaper adopts every orphan, so with
        no child left there is no descendant either, and /proc need not be walked."""
        self.reap()
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        return True

    def reap(self) -> None:
        """Collect every exited child, the agent's status among them."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.agent_pid:
                self.agent_status = os.waitstatus_to_exitcode(status)

    def sweep(self) -> None:
        """The agent exited: whatever it left running gets a short TERM, then KILL.

        A sandbox's last process (its pid namespace's init) often outlives bwrap by a
        moment, tearing the namespaces down: it is waited for first, woken by SIGCHLD, so a
        clean exit costs no walk of /proc and no polling.
        """
        if not self.await_children(SETTLE_S):
            return
        _signal_all(descendants(os.getpid()), signal.SIGTERM)
        self.await_children(min(self.grace_s, LEFTOVER_GRACE_S))
        self.kill_tree()
        self.reap()

    def await_children(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for every child to exit; True if some are still there."""
        deadline = time.monotonic() + timeout
        while self.has_children():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            ready, _, _ = select.select([self._wake_r], [], [], min(left, 0.05))
            if ready:
                os.read(self._wake_r, 512)
        return False


def parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--control FD --record PATH --grace S [--wrapped 0|1] [--deadline S]
    [--fence-grace S] [--cwd DIR] [--exe PATH] -- AGENT ARGV…``: ``--cwd`` is where the
    agent runs (the engine starts a native supervisor with ``posix_spawn``, which cannot
    change directory), ``--exe`` where ``AGENT`` was found on the agent's PATH."""
    split = argv.index("--")
    return dict(zip(argv[:split:2], argv[1:split:2], strict=True)), argv[split + 1 :]


def supervisor_from(options: dict[str, str]) -> Supervisor:
    deadline = options.get("--deadline")
    fence_grace = options.get("--fence-grace")
    return Supervisor(
        int(options["--control"]),
        float(options.get("--grace", "5")),
        options.get("--wrapped", "0") == "1",
        deadline_s=float(deadline) if deadline else None,
        fence_grace_s=float(fence_grace) if fence_grace else None,
    )


def main(argv: list[str]) -> None:
    options, agent_argv = parse(argv)
    supervise(options, agent_argv, os.environ)


def supervise(options: dict[str, str], agent_argv: list[str], env: Environ) -> None:
    """Supervise ``agent_argv`` (run with ``env``) to its end, then exit as it did (run as
    a script, or in a child the fork server just made); never returns."""
    supervisor = supervisor_from(options)
    subreaper = become_subreaper()
    pid = os.getpid()
    boot, host = host_facts()
    supervisor.record_path = options["--record"]
    supervisor.record = {
        "supervisor_pid": pid,
        "pgid": os.getpgid(0),
        "start_ticks": proc_start_ticks(pid),
        "boot_id": boot,
        "host": host,
        "subreaper": subreaper,
        "execution_id": env.get("RELAY_EXECUTION_ID", ""),
    }
    write_record(supervisor.record_path, supervisor.record, first=True)
    executable, cwd = options.get("--exe") or None, options.get("--cwd") or None
    if supervisor.engine_gone() or not supervisor.start(agent_argv, env, executable, cwd):
        os._exit(127)
    code = supervisor.run()
    supervisor.tell(f"exit {code}")
    if code < 0:  # die of the agent's signal, so the engine sees what the agent saw
        try:  # noqa: SIM105
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL has no handler to reset
            pass
        os.kill(pid, -code)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv[1:])
