"""Whether an agent can work at all, and when to try an unreachable one again.

Pure: the shell (:mod:`relay_engine.ops.agents`) reads and writes the rows. Login,
missing-CLI and refused-arguments failures hold until the agent's config changes or the
operator clears them: retrying cannot fix them. An unreachable agent is probed again
after 30 s, doubling up to 10 minutes, because networks come back by themselves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from relay_engine.contracts.config import AgentConfig
from relay_engine.core.failures import HELD_CLASSES, AgentFailure, FailureClass

READY = "ready"
PROBE_FIRST_S = 30.0
PROBE_MAX_S = 600.0


@dataclass(frozen=True)
class Availability:
    agent_id: str
    status: str  # "ready" or a FailureClass value
    reason: str | None = None
    fix: str | None = None
    until: float | None = None  # unreachable: the next probe; held classes: None
    failures: int = 0


def is_available(state: Availability | None, now: float) -> bool:
    """Ready, or unreachable with its probe due (the next launch is the probe)."""
    if state is None or state.status == READY:
        return True
    return state.status == FailureClass.UNREACHABLE and (state.until or 0.0) <= now


def is_probing(state: Availability | None, now: float) -> bool:
    """An unreachable agent whose probe is due: one launch at a time tests the network."""
    return (
        state is not None and state.status == FailureClass.UNREACHABLE and is_available(state, now)
    )


def probe_delay(failures: int) -> float:
    """30 s after the first unreachable run, doubling per consecutive one, at most 10 min."""
    doublings: int = 2 ** max(failures - 1, 0)  # int ** int is Any to mypy (negative: float)
    return min(PROBE_FIRST_S * doublings, PROBE_MAX_S)


def after_failure(current: Availability | None, failure: AgentFailure, now: float) -> Availability:
    """The agent's state once ``failure`` happened on it at ``now``.

    Several launches that were in flight together fail together: while a probe is not
    yet due, another failure of the same class does not double the back-off again.
    """
    same = current is not None and current.status == failure.kind
    pending = same and current is not None and (current.until or 0.0) > now
    failures = (current.failures if same and current else 0) + (0 if pending else 1)
    until = None
    if failure.kind == FailureClass.UNREACHABLE:
        until = current.until if pending and current else now + probe_delay(failures)
    return Availability(
        agent_id=current.agent_id if current else "",
        status=failure.kind.value,
        reason=failure.reason,
        fix=failure.fix,
        until=until,
        failures=failures,
    )


def holds(status: str) -> bool:
    return status in HELD_CLASSES


def config_hash(agent: AgentConfig) -> str:
    """A fingerprint of everything in the agent's config that could fix a held failure."""
    dumped = json.dumps(agent.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(dumped.encode()).hexdigest()[:16]


def describe(state: Availability | None, now: float, fmt_time: Callable[[float], str]) -> str:
    """One short phrase for a status line: "ready", "not logged in", "unreachable, probing at 14:32"."""
    if state is None or state.status == READY:
        return "ready"
    label = LABELS.get(state.status, state.status)
    if state.status == FailureClass.UNREACHABLE and state.until and state.until > now:
        return f"{label}, probing at {fmt_time(state.until)}"
    return label


LABELS = {
    FailureClass.AUTH.value: "not logged in",
    FailureClass.UNREACHABLE.value: "unreachable",
    FailureClass.CLI_MISSING.value: "CLI missing",
    FailureClass.CLI_REJECTED.value: "CLI refused relay's arguments",
}
