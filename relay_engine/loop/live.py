"""The engine's view of the agent processes it started itself."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from relay_engine.agents.adapters.base import (
    Adapter,
    AgentReport,
    Denial,
    StreamParser,
    ToolRequest,
)
from relay_engine.agents.launch import LaunchRequest, display_argv
from relay_engine.agents.runner import AGENT_DIR, LaunchSpec, RunningProcess, read_agent_file
from relay_engine.core.memory import ADDED_FILE, added_notes
from relay_engine.core.outcomes import Outcome, StopReason
from relay_engine.core.redaction import Redactor
from relay_engine.git.worktrees import MergeResult
from relay_engine.store.plain_rows import update_by_id
from relay_engine.store.schema import Execution

MAX_RESULT_FILE_BYTES = 4 << 20


@dataclass
class LiveExecution:
    execution_id: str
    task_key: str | None
    plan_id: int | None
    job_id: str
    agent_id: str
    provider: str
    process: RunningProcess
    parser: StreamParser
    stop_reason: StopReason | None = None
    last_output: str = ""
    saved_output: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None  # on the engine's clock, when its start was recorded
    adapter: Adapter | None = None  # how to talk to a conversing CLI
    access: str = "workspace-write"  # what the run may change (see AgentConfig.access)
    asks: dict[int, ToolRequest] = field(default_factory=dict)  # open asks it waits on
    denials: list[Denial] = field(default_factory=list)  # refused by relay or the operator
    turns_expected: int = 1  # results before its conversation is over (one per user line)
    waiting_since: float | None = None  # on the engine's clock, while an ask is open
    waited_s: float = 0.0  # time spent waiting on asks: not counted against its timeout

    def timed_out(self, now: float) -> bool:
        """Past its timeout on the engine's clock (the one ``now`` comes from), not counting
        the time it waited on the operator."""
        started = self.started_at if self.started_at is not None else self.process.started_at
        waiting = now - self.waiting_since if self.waiting_since is not None else 0.0
        return now - started - self.waited_s - waiting > self.process.spec.timeout_s

    def wait_on(self, ask_id: int, request: ToolRequest, now: float) -> None:
        self.asks[ask_id] = request
        self.extra["asked"] = True  # its asks are settled when it ends
        if self.waiting_since is None:
            self.waiting_since = now

    def stop_waiting(self, ask_id: int, now: float) -> ToolRequest | None:
        request = self.asks.pop(ask_id, None)
        if not self.asks and self.waiting_since is not None:
            self.waited_s += now - self.waiting_since
            self.waiting_since = None
        return request

    def turn_over(self) -> bool:
        """A conversing CLI answered every user line it was sent: nothing more to say."""
        return self.parser.report.turns_ended >= self.turns_expected

    def all_denials(self) -> list[Denial]:
        """What relay or the operator refused, then what the CLI refused on its own (a
        request relay denied shows up in the CLI's own list too: counted once)."""
        ours = {d.tool_use_id for d in self.denials if d.tool_use_id}
        cli = [d for d in self.parser.report.denials if d.tool_use_id not in ours]
        return [*self.denials, *cli]

    def stop(self, reason: StopReason, grace_s: float) -> None:
        """Ask the process group to stop; the first reason given is the one recorded."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self.process.terminate(grace_s)

    def pump(self, now: datetime, budget: int = 1 << 20) -> AgentReport:
        """Feed new output to the parser; bounded per call so a flood cannot stall a tick."""
        chunk = self.process.read_new_stdout(budget)
        if not chunk:
            return self.parser.report
        self.parser.feed(chunk, now)
        report = self.parser.report  # one copy per look: the reaper looks every tick
        self.last_output = report.last_progress or self.process.last_line() or self.last_output
        return report

    def drain(self, now: datetime) -> None:
        while chunk := self.process.read_new_stdout(1 << 20):
            self.parser.feed(chunk, now)

    def agent_file(self, name: str) -> str | None:
        """A file of the run's ``agent/`` folder (written inside its sandbox)."""
        return read_agent_file(
            self.process.spec.artifact_dir / AGENT_DIR / name, MAX_RESULT_FILE_BYTES
        )

    def memory_added(self) -> list[str]:
        """The notes the agent left with ``memory_add`` (its memory server's file)."""
        text = self.agent_file(ADDED_FILE)
        return added_notes(text) if text else []

    def result_file(self) -> Any:
        text = read_agent_file(self.process.result_path, MAX_RESULT_FILE_BYTES)
        try:
            return None if text is None else json.loads(text)
        except (OSError, ValueError, RecursionError):  # deep nesting is an agent's bad output
            return None


@dataclass(frozen=True)
class FinishedExecution:
    """An exited agent and what its exit means, ready to be written down.

    ``tree_settled`` says its worktree was dealt with (merged, kept or left to a new owner),
    so a write retried on a later tick never merges twice; ``merge`` is what the merge did,
    to be undone should the task turn out to belong to someone else by the time of writing.
    """

    live: LiveExecution
    outcome: Outcome
    report: AgentReport
    exit_code: int
    result_file: Any
    tree_settled: bool = False
    merge: MergeResult | None = None


def spawn_row(
    request: LaunchRequest, live: LiveExecution, spec: LaunchSpec, now: float, redactor: Redactor
) -> dict[str, Any]:
    """Where and how the agent runs (argv with secrets redacted), as its execution row's
    new values; the caller writes a tick's starts in one statement."""
    live.started_at = now
    return {
        "id": request.execution_id,
        "pid": live.process.pid,
        "pgid": live.process.pgid,
        "started_at": now,
        "argv": display_argv(spec.argv, request.prompt, redactor),
        "account": request.agent.account,
        "cwd": str(spec.cwd),
        "artifact_dir": str(spec.artifact_dir),
    }


def record_spawn(
    session: Session,
    request: LaunchRequest,
    live: LiveExecution,
    spec: LaunchSpec,
    now: float,
    redactor: Redactor,
) -> None:
    """Note on the execution row where and how the agent runs (argv with secrets redacted)."""
    update_by_id(session, Execution, [spawn_row(request, live, spec, now, redactor)])
