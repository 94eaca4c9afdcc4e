"""Agents: every agent with whether it can work and why not (a login, a limit, a spent
daily budget, a quota watermark), as ``relay agents`` and the console list them, and which
engines define each agent.

The availability read here is also what :mod:`.fleet` hands agent selection; the engines'
rosters (:func:`agent_homes`) are what :mod:`.waits` checks a pinned agent against, and
what ``relay submit`` accepts besides its own agents (:func:`live_agents`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.contracts.config import AgentConfig, RelayConfig
from relay_engine.contracts.time_format import format_time
from relay_engine.core.availability import READY, Availability, describe
from relay_engine.core.failures import FailureClass
from relay_engine.core.waits import AgentHome
from relay_engine.store.engines import why_gone
from relay_engine.store.read_model.providers import watermarks
from relay_engine.store.schema import AgentRecord, AgentStatus, EngineRecord, ProviderLimit
from relay_engine.store.spend import agent_holds


def known_agents(session: Session) -> list[AgentRecord]:
    """Every agent some engine defines, once each (the most recently mirrored row), by id."""
    latest: dict[str, AgentRecord] = {}
    for record in session.exec(select(AgentRecord).order_by(col(AgentRecord.updated_at))):
        latest[record.id] = record
    return [latest[agent_id] for agent_id in sorted(latest)]


def availability_map(session: Session) -> dict[str, Availability]:
    """Every agent that is not ready, by id (what selection reads)."""
    rows = session.exec(select(AgentStatus).where(col(AgentStatus.status) != READY))
    return {row.agent_id: availability_of(row) for row in rows}


def availability_of(row: AgentStatus) -> Availability:
    return Availability(
        agent_id=row.agent_id, status=row.status, reason=row.reason, fix=row.fix,
        until=row.until, failures=row.failures,
    )  # fmt: skip


def shared_logins(
    availability: Mapping[str, Availability], agents: Iterable[AgentConfig]
) -> dict[str, Availability]:
    """A login belongs to its account: when an agent of a named account is not logged in,
    every agent of that account is not either (they share the CLI's config directory)."""
    configured = list(agents)
    by_key = {a.id: a.account_key for a in configured if a.account}
    failed = {
        by_key[agent_id]: state
        for agent_id, state in availability.items()
        if agent_id in by_key and state.status == FailureClass.AUTH
    }
    shared = dict(availability)
    for agent in configured:
        state = failed.get(by_key.get(agent.id, ""))
        if state is not None and agent.id not in shared:
            shared[agent.id] = Availability(
                agent.id, state.status, state.reason, state.fix, state.until, state.failures
            )
    return shared


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One agent and whether it can work: status ready, limited (its provider), budget (its
    daily budget is spent), or why it cannot (auth, unreachable, cli-missing, …)."""

    id: str
    provider: str
    enabled: bool
    status: str
    reason: str | None
    fix: str | None
    until: float | None
    summary: str  # "ready", "not logged in", "unreachable, probing at 14:32"
    roles: tuple[str, ...] = field(default=())
    account: str = ""  # its named account ("" for the provider's default)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "account": self.account or None,
            "enabled": self.enabled,
            "status": self.status,
            "reason": self.reason,
            "fix": self.fix,
            "until": self.until,
        }


@dataclass(frozen=True, slots=True)
class _Listed:
    id: str
    provider: str
    enabled: bool
    roles: tuple[str, ...]
    account: str
    key: str


def agent_rows(
    session: Session,
    now: float,
    agents: Iterable[AgentConfig] | None = None,
    *,
    config: RelayConfig | None = None,
) -> list[AgentRow]:
    """Every agent with its availability: ``agents`` from config, else as the last engine
    mirrored them (what a console on another host sees). With ``config``, an agent whose
    daily budget (or its provider's or account's) is spent shows status "budget"; an agent
    whose account is over its quota watermark shows status "quota"."""
    states = availability_map(session)
    limits = {
        row.provider: row
        for row in session.exec(select(ProviderLimit).where(ProviderLimit.status == "limited"))
        if (row.reset_at or 0.0) > now
    }
    listed = _listed(session, agents)
    if agents is not None:
        states = shared_logins(states, agents)
    held = agent_holds(session, config, now) if config is not None else {}
    marks = watermarks(session, config, now)
    rows = []
    for agent in listed:
        state = states.get(agent.id)
        row = _agent_row(agent.id, agent.provider, agent.enabled, state, limits.get(agent.key), now)
        hold = held.get(agent.id)
        if hold is not None and row.status == READY:
            row = AgentRow(
                agent.id, agent.provider, agent.enabled, "budget",
                reason=hold.reason,
                fix="wait for midnight, or raise daily_budget_usd in relay.toml",
                until=hold.until,
                summary=f"daily budget spent until {format_time(hold.until)}",
            )  # fmt: skip
        mark = marks.get(agent.key)
        if mark is not None and row.status == READY:
            row = AgentRow(
                agent.id, agent.provider, agent.enabled, "quota", reason=mark.reason,
                fix="nothing to do: new work goes to another account, or waits for the reset",
                until=mark.until, summary=mark.reason,
            )  # fmt: skip
        rows.append(_with_roles(row, agent.roles, agent.account))
    return rows


def _listed(session: Session, agents: Iterable[AgentConfig] | None) -> list[_Listed]:
    if agents is None:
        return [
            _Listed(r.id, r.provider, r.enabled, tuple(r.roles or ()), r.account or "",
                    f"{r.provider}/{r.account}" if r.account else r.provider)
            for r in known_agents(session)
        ]  # fmt: skip
    return [
        _Listed(a.id, a.provider, a.enabled, tuple(a.roles), a.account or "", a.account_key)
        for a in agents
    ]


def _with_roles(row: AgentRow, roles: tuple[str, ...], account: str = "") -> AgentRow:
    return AgentRow(
        row.id, row.provider, row.enabled, row.status, row.reason, row.fix, row.until,
        row.summary, roles, account,
    )  # fmt: skip


def _agent_row(
    agent_id: str,
    provider: str,
    enabled: bool,
    state: Availability | None,
    limit: ProviderLimit | None,
    now: float,
) -> AgentRow:
    if state is None and limit is not None:  # able to work, but its provider is limited
        until = limit.reset_at
        return AgentRow(
            agent_id,
            provider,
            enabled,
            "limited",
            limit.source_text,
            "nothing to do: relay resumes the work at the reset",
            until,
            f"limited until {format_time(until)}",
        )
    return AgentRow(
        id=agent_id,
        provider=provider,
        enabled=enabled,
        status=state.status if state else READY,
        reason=state.reason if state else None,
        fix=state.fix if state else None,
        until=state.until if state else None,
        summary=describe(state, now, format_time),
    )


def agent_homes(session: Session, now: float, lease_seconds: float) -> dict[str, list[AgentHome]]:
    """Agent id -> the engines that define it (live ones first, then the most recently
    seen), from the engines registry's rosters."""
    homes: dict[str, list[AgentHome]] = {}
    records = session.exec(select(EngineRecord).order_by(col(EngineRecord.heartbeat_at).desc()))
    for record in records:
        live = why_gone(record, now=now, lease_seconds=lease_seconds) is None
        for agent in record.agents or ():
            homes.setdefault(agent, []).append(AgentHome(record.id, record.host, live))
    for found in homes.values():
        found.sort(key=lambda home: not home.live)
    return homes


def live_agents(session: Session, now: float, lease_seconds: float) -> set[str]:
    """Agents some live engine defines: what ``relay submit`` accepts besides its own."""
    homes = agent_homes(session, now, lease_seconds)
    return {agent for agent, found in homes.items() if any(h.live for h in found)}
