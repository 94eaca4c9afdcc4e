"""Setting a workspace up and running it: ``relay init``, ``submit``, ``run`` and ``events``."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

from rich.markup import escape
from rich.text import Text

from relay_engine.agents.launch import missing_executable
from relay_engine.cli.output import console, err, open_store, workspace_of
from relay_engine.cli.status import print_status, report_for
from relay_engine.contracts.config import CONFIG_FILE, RelayConfig, load_config
from relay_engine.contracts.job_file import JobSpec, load_job_file
from relay_engine.contracts.time_format import limit_words
from relay_engine.core.faults import DatabaseBusy
from relay_engine.core.waits import wait_lines
from relay_engine.ops.jobs import submit_job
from relay_engine.ops.upstream import check_batch
from relay_engine.store import feed
from relay_engine.store.db import Store, database_url
from relay_engine.store.feed import FeedMark
from relay_engine.store.read_model.agents import live_agents
from relay_engine.store.read_model.waits import read_waits
from relay_engine.store.schema import Event


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    if name == "submit":
        parser.add_argument("files", nargs="+")
    elif name == "run":
        parser.add_argument(
            "--until-idle",
            action="store_true",
            help="exit when nothing is queued or running: 0 all done, 1 a job failed, 3 only "
            "waits are left (one line each: what for, until when, the command that releases it)",
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="with --until-idle: keep running through waits (limits, gates, held tasks, "
            "blocked jobs) until the work is done",
        )
        parser.add_argument("--quiet", action="store_true", help="do not print events")
    elif name == "events":
        parser.add_argument("--follow", "-f", action="store_true")
        parser.add_argument("--limit", "-n", type=int, default=0)
    runs = {"init": cmd_init, "submit": cmd_submit, "run": cmd_run, "events": cmd_events}
    parser.set_defaults(func=runs[name])


def cmd_init(args: argparse.Namespace) -> int:
    workspace = workspace_of(args)
    workspace.mkdir(parents=True, exist_ok=True)
    templates = resources.files("relay_engine.cli") / "templates"
    for name, target in ((CONFIG_FILE, CONFIG_FILE), ("example-job.toml", "example-job.toml")):
        path = workspace / target
        if path.exists():
            console.print(f"[dim]kept existing {escape(str(path))}[/]")
            continue
        path.write_text((templates / name).read_text(encoding="utf-8"), encoding="utf-8")
        console.print(f"wrote {escape(str(path))}")
    Store(database_url(workspace, args.db), create_empty=True)  # RELAY_DB's, not a new file
    console.print("next: [bold]relay submit example-job.toml && relay run --until-idle[/]")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    config = load_config(workspace_of(args))
    # A file that cannot be read is refused before any database opens; agents other
    # engines define are read only when a job names one relay.toml does not.
    specs = _load_jobs(args.files, config, known_agents=None)
    store = open_store(args)
    agents = {a.id for a in config.agents}
    if any(t.agent is not None and t.agent not in agents for s in specs for t in s.tasks):
        specs = _load_jobs(args.files, config, agents | _agents_elsewhere(store, config))
    else:
        specs = _load_jobs(args.files, config, agents)
    check_batch(store, specs)
    for spec in specs:
        outcome = submit_job(store, spec, now=time.time(), engine=config.engine)
        verb = "submitted" if outcome.created else "unchanged (already submitted)"
        what = "scheduled job" if spec.job.schedule is not None else "job"
        console.print(f"{what} [bold]{outcome.job_id}[/] {verb}: {outcome.task_count} tasks")
    return 0


def _load_jobs(
    files: list[str], config: RelayConfig, known_agents: set[str] | None
) -> list[JobSpec]:
    return [
        load_job_file(
            Path(f),
            known_roles=config.roles,
            known_agents=known_agents,
            max_bytes=config.inputs.max_file_bytes,
            max_input_bytes=config.inputs.max_task_input_bytes,
        )
        for f in files
    ]


STATS_ENV = "RELAY_STATS_FILE"


def _write_stats(engine: Any) -> None:
    """With RELAY_STATS_FILE set, what this engine asked of its database and how long its
    ticks took, as JSON: the benches read the engine's own counts."""
    path = os.environ.get(STATS_ENV)
    if not path:
        return
    stats = {"engine": engine.id, "ticks": list(engine.ticks), **engine.store.stats.as_dict()}
    Path(path).write_text(json.dumps(stats), encoding="utf-8")


def _agents_elsewhere(store: Store, config: RelayConfig) -> set[str]:
    """Agents a live engine on this database defines: a task may be pinned to one even
    where this workspace's relay.toml does not define it (that engine will run it)."""
    with store.read() as session:
        return live_agents(session, time.time(), config.engine.lease_seconds)


def cmd_run(args: argparse.Namespace) -> int:
    from relay_engine.loop.engine import Engine

    config = load_config(workspace_of(args))  # a bad relay.toml is refused before anything opens
    engine = Engine(workspace_of(args), store=_store_when_free(args, config), config=config)
    _log_to_stderr()
    _say_who_cannot_start(config)
    stop = threading.Event()
    interrupted = threading.Event()
    _stop_on_signals(engine.wake, stop, interrupted)
    engine.subscribe(lambda: None)
    follower = None if args.quiet else _follow_in_thread(engine.store, stop)
    until_idle = args.until_idle or args.wait
    # What start-up built (modules, mappers, the config) lives as long as the process: the
    # cyclic GC stops walking it at every collection, 0.26 -> 0.07 ms of CPU per task.
    gc.freeze()
    ok = engine.run(stop, until_idle=until_idle, waits="all" if args.wait else "none")
    stop.set()
    _write_stats(engine)
    if follower is not None:
        follower.join(timeout=2)
    if interrupted.is_set():
        return 0  # stopping on request, with the work released, is a clean exit
    if not until_idle:
        return 0 if ok else 1
    print_status(engine.store, report_for(engine.store, None, config.engine))
    return _idle_exit(engine.store, ok, config.engine.lease_seconds)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_on_signals(
    wake: Callable[[], None], stop: threading.Event, interrupted: threading.Event
) -> None:
    """Ctrl-C and SIGTERM stop the run, its agents released back to the queue.

    A Python signal handler runs in the main thread between two of its bytecodes, possibly
    while that thread holds the lock of the engine's wake event (inside its ``wait``): a
    handler that woke the engine itself could wait on that lock forever, and the run never
    stopped. The handlers do nothing; Python's C-level handler writes each signal's number
    to a pipe, and a thread of its own reads it and stops the run."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _noted)

    def watch() -> None:
        while received := os.read(read_end, 64):
            if any(signum in STOP_SIGNALS for signum in received):
                err.print("[yellow]stopping: running agents are released back to the queue[/]")
                interrupted.set()
                stop.set()
                wake()

    threading.Thread(target=watch, daemon=True, name="relay-signals").start()


def _noted(_signum: int, _frame: FrameType | None) -> None:
    """The signal is taken from the wakeup pipe (see :func:`_stop_on_signals`)."""


def _idle_exit(store: Store, ok: bool, lease_s: float) -> int:
    """Exit 3 with a line per wait when only waits are left: an unattended run that stops
    tells its operator exactly what to type next."""
    with store.read() as session:
        waits = read_waits(session, lease_seconds=lease_s)
    if not waits:
        return 0 if ok else 1
    console.print(f"[bold yellow]waiting ({len(waits)}):[/]")
    for line in wait_lines(waits):
        console.print(f"  {line}", highlight=False, markup=False)
    return 3


def _say_who_cannot_start(config: RelayConfig) -> None:
    """An agent whose program is missing would only park its tasks: say so at once, on
    stderr, with the fix (``relay doctor`` tells more)."""
    for agent in config.agents:
        problem = missing_executable(agent) if agent.enabled else None
        if problem is not None:
            err.print(f"[yellow]agent {agent.id} cannot start: {escape(problem.reason)}[/]"
                      f" [dim]fix: {escape(problem.fix or '')}[/]", highlight=False)  # fmt: skip


def _store_when_free(args: argparse.Namespace, config: RelayConfig) -> Store:
    """An engine started while another process holds the database waits its turn."""
    while True:
        try:
            return open_store(args, config=config)
        except DatabaseBusy:
            err.print("database busy, retrying", highlight=False)
            time.sleep(1.0)


def _log_to_stderr() -> None:
    """The engine's own warnings ("database busy, retrying", "disk full: …") reach the operator."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s relay: %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("relay_engine")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)


def _follow_in_thread(store: Store, stop: threading.Event) -> threading.Thread:
    with store.read() as session:
        start = feed.end(session, time.time())

    def follow() -> None:
        mark = start
        while True:
            stopping = stop.is_set()
            mark = _print_events_after(store, mark)
            if stopping:
                return
            stop.wait(0.3)

    thread = threading.Thread(target=follow, daemon=True, name="relay-events")
    thread.start()
    return thread


def _print_events_after(store: Store, mark: FeedMark) -> FeedMark:
    """Print the feed after ``mark`` a page at a time; the mark after what was printed."""
    while True:
        events, mark = store.events_after(mark, feed.PAGE)
        for event in events:
            _print_event(event)
        if len(events) < feed.PAGE:
            return mark


def _print_event(event: Event) -> None:
    line = Text()
    line.append(time.strftime("%H:%M:%S ", time.localtime(event.at)), style="dim")
    line.append(
        f"{event.kind:<18} ", style={"error": "red", "warning": "yellow"}.get(event.level, "")
    )
    line.append(limit_words(event.message, time.time()))
    console.print(line)


def cmd_events(args: argparse.Namespace) -> int:
    store = open_store(args, readonly=True)
    if args.limit:
        with store.read() as session:
            events, mark = feed.read_last(session, args.limit, time.time())
        for event in events:
            _print_event(event)
    else:
        mark = _print_events_after(store, feed.START)
    while args.follow:
        mark = _print_events_after(store, mark)
        time.sleep(0.3)
    return 0
