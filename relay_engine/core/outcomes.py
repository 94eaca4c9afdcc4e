"""What an agent's exit means for its task.

Pure: the shell gathers the facts.

An exit is judged in this order: the engine's own reason for stopping it (cancelled,
lease lost, released on shutdown, timed out) wins; then a usage-limit signal (the
attempt is not counted); then the exit code and the CLI's own error flag.

Whether the provider session survives an outcome is decided here too
(:func:`ends_session`): as in the seed, any failure but a timeout ends it (a retry that
resumed the conversation that just failed would carry its mistake on), unless the failure
class says the session itself is fine (a limit, a network that was down).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from relay_engine.core.failures import AgentFailure, FailureClass
from relay_engine.core.limits import LimitSignal
from relay_engine.core.redaction import Redactor


class OutcomeKind(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    LIMITED = "limited"
    LOST = "lost"  # the task moved on without us (lease lost, recovered): record nothing on it
    CANCELLED = "cancelled"  # stopped because the operator cancelled or dropped its task
    RELEASED = "released"  # the engine stopped it on shutdown: back to QUEUED, attempt refunded
    UNAVAILABLE = "unavailable"  # the agent could not work at all: attempt refunded, agent marked
    SESSION_GONE = "session-gone"  # the resumed session no longer exists: refunded, run fresh


class StopReason(StrEnum):
    TIMEOUT = "timeout"
    LOST = "lost"
    CANCELLED = "cancelled"
    RELEASED = "released"
    LIMITED = "limited"
    UNAVAILABLE = "unavailable"
    FENCED = "fenced"  # its supervisor stopped it at the deadline: the lease was not renewed


FENCED_ERROR = (
    "fenced: stopped at its supervisor's deadline, the engine could not renew the lease "
    "in time (paused or cut off from the database)"
)


# The task moved on without the execution: nothing it did is recorded on the task.
GONE = frozenset({OutcomeKind.LOST, OutcomeKind.CANCELLED})


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    summary: str | None = None
    data: Any = None
    error: str | None = None
    limit: LimitSignal | None = None
    diffstat: str | None = None
    commit: str | None = None
    failure: AgentFailure | None = None


@dataclass(frozen=True)
class ExitFacts:
    exit_code: int
    stop_reason: StopReason | None
    timeout_s: float
    cli_error: str | None
    cli_is_error: bool
    result_text: str | None
    result_file: Any  # parsed result.json, or None
    limit: LimitSignal | None
    stderr_tail: str
    failure: AgentFailure | None = None
    resumed: bool = False  # the run was asked to resume a provider session


STALE_SESSION_FAILURES = frozenset(
    {FailureClass.SESSION_GONE, FailureClass.AUTH, FailureClass.CLI_REJECTED}
)
"""Agent failures after which resuming the same session cannot help; the others
(``unreachable``, ``cli-missing``) say nothing about the conversation, which is kept."""


def ends_session(outcome: Outcome) -> bool:
    """Whether the workstream's provider session goes stale after ``outcome``.

    A failed attempt ends it: the retry starts a fresh conversation with the error in its
    prompt instead of resuming the one that went wrong (the seed's
    ``isRetryableProviderSessionFailure``). A timeout keeps it (the work was cut short, not
    wrong), and so do a limit and an agent failure whose class leaves the conversation
    intact; one in :data:`STALE_SESSION_FAILURES` ends it.
    """
    if outcome.failure is not None:
        return outcome.failure.kind in STALE_SESSION_FAILURES
    return outcome.kind is OutcomeKind.FAILED


def _result_parts(facts: ExitFacts) -> tuple[str | None, Any]:
    result = facts.result_file
    if isinstance(result, dict):
        summary = result.get("summary")
        return (str(summary) if summary is not None else facts.result_text), result
    if result is not None:
        return str(result), result
    return facts.result_text, None


def judge_exit(facts: ExitFacts) -> Outcome:
    if facts.stop_reason is StopReason.LOST:
        return Outcome(OutcomeKind.LOST, error="the task was taken from this execution")
    if facts.stop_reason is StopReason.CANCELLED:
        return Outcome(OutcomeKind.CANCELLED, error="stopped: its task was cancelled")
    if facts.stop_reason is StopReason.RELEASED:
        return Outcome(OutcomeKind.RELEASED, error="released when the engine stopped")
    if facts.stop_reason is StopReason.FENCED:  # not the task's doing: refunded, or lost
        return Outcome(OutcomeKind.RELEASED, error=FENCED_ERROR)
    if facts.limit is not None:
        return Outcome(OutcomeKind.LIMITED, error=facts.limit.source_text, limit=facts.limit)
    if facts.failure is not None:
        return _agent_failure(facts, facts.failure)
    if facts.stop_reason is StopReason.TIMEOUT:
        return Outcome(OutcomeKind.TIMEOUT, error=f"timed out after {facts.timeout_s:.0f}s")
    summary, data = _result_parts(facts)
    if facts.exit_code == 0 and not facts.cli_is_error:
        return Outcome(OutcomeKind.SUCCEEDED, summary=summary, data=data)
    reason = facts.cli_error or _last_line(facts.stderr_tail) or "no error output"
    return Outcome(
        OutcomeKind.FAILED, summary=summary, data=data, error=f"exit {facts.exit_code}: {reason}"
    )


def _agent_failure(facts: ExitFacts, failure: AgentFailure) -> Outcome:
    error = f"{failure.kind.value}: {failure.reason}"
    if failure.kind is not FailureClass.SESSION_GONE:
        return Outcome(OutcomeKind.UNAVAILABLE, error=error, failure=failure)
    if facts.resumed:
        return Outcome(OutcomeKind.SESSION_GONE, error=error, failure=failure)
    # Not resumed, so not relay's doing: an ordinary, charged failure (and never a loop).
    return Outcome(OutcomeKind.FAILED, error=f"exit {facts.exit_code}: {failure.reason}")


def _last_line(text: str) -> str:
    """The last line that says something: a lone `}` closing a JSON error says nothing."""
    lines = [line.strip() for line in text.splitlines() if any(c.isalnum() for c in line)]
    return lines[-1][:500] if lines else ""


def redact_outcome(outcome: Outcome, redactor: Redactor) -> Outcome:
    """The same outcome with every secret value masked in its texts and result data."""
    data = outcome.data
    if data is not None:
        dumped = json.dumps(data)
        cleaned = redactor.text(dumped)
        data = json.loads(cleaned) if cleaned != dumped else data
    limit = outcome.limit
    if limit is not None:
        limit = replace(limit, source_text=redactor.text(limit.source_text))
    failure = outcome.failure
    if failure is not None:
        failure = replace(failure, reason=redactor.text(failure.reason))
    return replace(
        outcome,
        summary=redactor.optional(outcome.summary),
        error=redactor.optional(outcome.error),
        data=data,
        limit=limit,
        failure=failure,
    )
