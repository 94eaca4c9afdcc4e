"""One warm process per engine that forks the agents' supervisors where the native one cannot be built.

The engine's agents normally run under the native supervisor (``supervisor.c``, see
:mod:`relay_engine.agents.native`); this server is the fallback where no C compiler is at
hand (or ``RELAY_SUPERVISOR=fork``). Starting ``python supervisor.py`` for every agent cost ~10 ms of CPU (most of it the
interpreter starting, then ``ctypes`` for ``prctl``) and ~10 MB of memory per running
agent. The engine instead starts this script once (``python -I -S forkserver.py --socket
FD``, standard library only): it loads the supervisor and ``ctypes`` once, freezes its
objects out of the garbage collector (so a fork's pages stay shared), and forks one
supervisor per request. A forked supervisor is exactly the script's supervisor -- child
subreaper, on-disk record before the agent runs, the agent's tree stopped at exit, on
command, at its deadline and when its engine dies -- in a session of its own.

The protocol, over a Unix stream socket shared with the engine: a request is an 8-byte
length and a JSON body (argv, env and the supervisor's options), sent with four file
descriptors (SCM_RIGHTS): the agent's stdin, stdout, stderr and the supervisor's end of its
control socket. The answer is one line, ``pid N`` or ``error WHY``. Exits are not reported
here: each supervisor tells its engine on its control socket, whose end-of-file says it is
gone. The server reaps its children and exits when the engine's end closes.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import socket
import sys

TYPE_CHECKING = False  # not typing's, which the fork server does not import

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if TYPE_CHECKING:  # typeshed has no stubs for _signal; mypy finds supervisor in its package
    import signal
    from typing import TypedDict

    from relay_engine.agents import supervisor as sup

    class Request(TypedDict):
        """A request as the engine writes it (``runner.ForkServer.spawn``), read from JSON."""

        argv: list[str]
        env: dict[str, str]
        options: dict[str, str]  # --cwd and --exe among them, as the native one gets them
else:
    import _signal as signal

    import supervisor as sup  # the script's own directory, as when run as a script

FDS = 4  # stdin, stdout, stderr, control
HEADER = 8
TAG = b"RELAY_EXECUTION_ID="
TAG_ROOM = 160  # the server starts with RELAY_EXECUTION_ID set to this many placeholder bytes


def tag_address() -> int | None:
    """Where the placeholder tag's value lies in this process's environment block, found
    once by the server: a forked child has the same addresses, so it only writes there.

    A process's ``/proc/PID/environ`` is the environment block it was *exec'd* with, which
    a fork shares with its server; recovery's last-resort sweep finds an execution's
    processes by that tag. The server is started with a placeholder tag of
    :data:`TAG_ROOM` bytes, and each child writes its own id over it in place (as
    setproctitle does with argv). None where there is no placeholder or no ``ctypes``."""
    if sup.load_libc() is None:
        return None
    try:
        with open("/proc/self/environ", "rb") as fh:
            block = fh.read()
        with open("/proc/self/stat", "rb") as fh:
            env_start = int(fh.read().rpartition(b")")[2].split()[47])
    except (OSError, ValueError, IndexError):
        return None
    found = 0 if block.startswith(TAG) else block.find(b"\0" + TAG) + 1
    if found <= 0 and not block.startswith(TAG):
        return None
    return env_start + found + len(TAG)


def tag_environ(where: int | None, execution_id: str) -> bool:
    """Make this forked child carry its execution's tag where the kernel shows it: the id
    written over the placeholder at ``where`` (one page of the stack is copied). False
    where it could not (no placeholder, an id too long)."""
    value = execution_id.encode()
    if where is None or len(value) >= TAG_ROOM:
        return False
    import ctypes  # loaded by the server already (supervisor.load_libc): a dict look-up

    ctypes.memmove(where, value + b"\0" * (TAG_ROOM - len(value)), TAG_ROOM)
    return True


def _receive(conn: socket.socket) -> tuple[Request, list[int]] | None:
    """One request and its descriptors; None at end-of-file or a reset (the engine is gone:
    killed, its socket reset, which is no fault of ours to print)."""
    try:
        data, ancillary, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(FDS * 4))
    except ConnectionError:
        return None
    if not data:
        return None
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds.extend(
                int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, usable, 4)
            )
    size = int.from_bytes(data[:HEADER], "big")
    body = bytearray(data[HEADER:])
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(bytes(body)), fds


def _child(
    request: Request, fds: list[int], server_fds: list[int], led: int, tag_at: int | None
) -> None:
    """In the forked child: become the supervisor of this request's agent; never returns.

    ``led`` is closed once the child leads its own session, so the pid the server answers
    is already a process group a kill can reach. Every page the child writes to is a page
    copied from the server, so it does as little as it can: no collection, no rebuilt
    ``os.environ`` (the agent gets the request's env from ``posix_spawn``; the child's
    own, as the kernel shows it, gets the execution's tag), nothing read twice."""
    gc.disable()  # a collection would touch (and copy) every page shared with the server
    code = 127
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in server_fds:
            os.close(fd)
        os.setsid()
        os.close(led)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds[:3]:
            if fd > 2:
                os.close(fd)
        env, options = request["env"], request["options"]
        tag_environ(tag_at, env.get("RELAY_EXECUTION_ID", ""))
        if not options.get("--exe"):  # posix_spawnp searches this process's PATH: the agent's
            os.environ.pop("PATH", None)
            os.environ.update({"PATH": env["PATH"]} if "PATH" in env else {})
        options["--control"] = str(fds[3])
        sup.supervise(options, request["argv"], env)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.write(2, f"relay: supervisor could not start: {error}\n".encode())
    os._exit(code)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(conn: socket.socket) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    libc = sup.load_libc()
    if libc is not None:
        libc.prctl  # noqa: B018 - looked up now (ctypes caches it), not in every child
    sup.host_facts()
    tag_at = tag_address()
    gc.collect()
    gc.freeze()  # the forks' pages stay shared: no collection touches them
    while True:
        watched: list[socket.socket | int] = [conn, wake_r]
        ready, _, _ = select.select(watched, [], [])
        if wake_r in ready:
            os.read(wake_r, 512)
            _reap()
        if conn not in ready:
            continue
        received = _receive(conn)
        if received is None:
            return
        request, fds = received
        led_r, led_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as error:
            reply = f"error cannot fork a supervisor: {error.strerror}"
        else:
            if pid == 0:
                os.close(led_r)
                _child(request, fds, [conn.fileno(), wake_r, wake_w], led_w, tag_at)
            reply = f"pid {pid}"
        os.close(led_w)
        os.read(led_r, 1)  # end-of-file: the child has called setsid (or died)
        os.close(led_r)
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(reply.encode() + b"\n")
        except OSError:  # the engine died waiting: as at end-of-file, its supervisors see it too
            return


def main(argv: list[str]) -> None:
    fd = int(argv[argv.index("--socket") + 1])
    conn = socket.socket(fileno=fd)
    try:
        serve(conn)
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1:])
