"""Deciding which claimed work has lost its runner.

Pure: the shell supplies liveness.

Several engines may share one workspace or database, so work is only taken back when
its owner is provably gone: on this host, the owner's pid with its start time no
longer exists; on another host, its heartbeat is older than the lease TTL. An expired
lease is recovered whatever the owner's state, since the owner stopped renewing it.

A recovery is the infrastructure's fault, not the task's: it refunds the attempt and
counts against a separate, bounded recovery budget instead, so a crash of the engine
never fails a task, while a task that kills its engine every time it runs still stops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class OwnerFacts:
    engine_id: str
    host: str
    heartbeat_at: float
    stopped: bool
    process_alive: bool | None  # None when the owner runs on another host


@dataclass(frozen=True)
class ClaimFacts:
    key: str
    execution_id: str
    owner: str | None
    lease_expires_at: float | None
    attempt: int
    max_attempts: int
    recoveries: int = 0  # times this task was already taken back from a lost runner


@dataclass(frozen=True)
class Recovery:
    key: str
    execution_id: str
    reason: str  # "orphaned: …" or "lease expired"
    retry: bool  # True: back to QUEUED, attempt refunded; False: FAILED (recovery budget spent)
    kill_local_group: bool  # the owner ran here, so its agent's process group may linger


def owner_is_gone(owner: OwnerFacts | None, *, my_host: str, now: float, ttl: float) -> str | None:
    """Why the owner engine is gone, or None while it may still be running."""
    if owner is None:
        return "its engine is unknown"
    if owner.stopped:
        return f"engine {owner.engine_id} stopped"
    if owner.host == my_host and owner.process_alive is False:
        return f"engine {owner.engine_id} (pid gone) on {owner.host}"
    if owner.host != my_host and now - owner.heartbeat_at > ttl:
        return (
            f"engine {owner.engine_id} on {owner.host} silent for {now - owner.heartbeat_at:.0f}s"
        )
    return None


def decide_recoveries(
    claims: Iterable[ClaimFacts],
    owners: Mapping[str, OwnerFacts],
    *,
    my_engine: str,
    my_live: frozenset[str],
    my_host: str,
    now: float,
    ttl: float,
    max_recoveries: int = 10,
) -> list[Recovery]:
    """Claims to take back: orphans of dead engines and leases nobody renewed."""
    decisions = []
    for claim in claims:
        if claim.execution_id in my_live:
            continue
        owner = owners.get(claim.owner or "")
        if claim.owner == my_engine:
            reason: str | None = "orphaned: this engine lost track of it"
        else:
            gone = owner_is_gone(owner, my_host=my_host, now=now, ttl=ttl)
            reason = f"orphaned: {gone}" if gone else None
        if reason is None and claim.lease_expires_at is not None and claim.lease_expires_at < now:
            reason = "lease expired"
        if reason is None:
            continue
        decisions.append(
            Recovery(
                key=claim.key,
                execution_id=claim.execution_id,
                reason=reason,
                retry=claim.recoveries < max_recoveries,
                kill_local_group=owner is not None and owner.host == my_host,
            )
        )
    return decisions


def budget_spent_reason(recoveries: int, reason: str) -> str:
    """Why a task is failed by recovery: its runner was lost every time it ran."""
    return (
        f"recovered {recoveries} times (max_recoveries): its engine died or stalled every "
        f"time it ran; last: {reason}"
    )
