"""Which agent runs a task.

Pure: the engine maps its config and database rows into the small frozen facts below and
acts on the returned `Selection`. `now` is a parameter so limits can be judged without a clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from relay_engine.contracts.config import AgentConfig
from relay_engine.core.availability import Availability, is_available, is_probing
from relay_engine.core.capacity import FleetCaps, FleetCounts
from relay_engine.core.quota import Watermark


@dataclass(frozen=True)
class AgentFacts:
    id: str
    provider: str
    roles: frozenset[str]
    model_class: str | None
    enabled: bool
    max_concurrent: int | None
    running: int
    account: str = ""  # its account key ("claude/work"); "" means the provider's default

    @property
    def key(self) -> str:
        """What limits, quota windows and exclusions are kept under."""
        return self.account or self.provider


@dataclass(frozen=True)
class ProviderFacts:
    """An account key (a provider's default account, or ``provider/name``) that may start
    nothing new until ``limited_until``: a usage limit, or a quota window over its
    watermark (``reason`` says which, for the park message)."""

    provider: str
    limited_until: float | None  # None, or a time not after now, means usable
    reason: str | None = None


@dataclass(frozen=True)
class PinFacts:
    agent_id: str  # active pinned assignment for (job, workstream, role)


@dataclass(frozen=True)
class Selected:
    agent_id: str
    provider: str
    via: str  # "pin" | "task-pin" | "auto"


@dataclass(frozen=True)
class Park:
    provider: str  # what the task waits on: a limited provider, or an unavailable agent's id
    until: float | None  # None: until an operator or a config change clears the agent
    reason: str
    agent: str | None = None  # set when the wait is for an unavailable agent


@dataclass(frozen=True)
class Wait:
    reason: str


@dataclass(frozen=True)
class NoAgent:
    reason: str


Selection = Selected | Park | Wait | NoAgent


class NeedsAgent(Protocol):
    """What selection reads of the work it places: a task row, or a planner round."""

    @property
    def job_id(self) -> str: ...
    @property
    def workstream(self) -> str | None: ...
    @property
    def role(self) -> str: ...
    @property
    def model_class(self) -> str | None: ...
    @property
    def pinned_agent(self) -> str | None: ...


@dataclass(frozen=True)
class Work:
    """Work to place that has no task row of its own (a planner round)."""

    job_id: str
    role: str
    workstream: str | None = None
    model_class: str | None = None
    pinned_agent: str | None = None


@dataclass(frozen=True)
class FleetView:
    """What selection knows of the fleet at one moment: accounts limited until when, agents
    that cannot work, the active pins by (job, workstream, role), and accounts whose quota
    window is over its watermark."""

    limits: Mapping[str, float] = field(default_factory=dict)
    availability: Mapping[str, Availability] = field(default_factory=dict)
    pins: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    watermarks: Mapping[str, Watermark] = field(default_factory=dict)


def pick_agent(
    work: NeedsAgent,
    agents: Sequence[AgentConfig],
    fleet: FleetView,
    now: float,
    *,
    running: Counter[str] | None = None,
    exclude: frozenset[str] = frozenset(),
    counts: FleetCounts | None = None,
    caps: FleetCaps | None = None,
    prefer: str | None = None,
) -> Selection:
    """The agent for ``work`` among the configured ``agents``. ``running`` counts this
    engine's claims per agent; ``counts`` and ``caps`` are the fleet-wide claims and caps,
    when the operator set any; ``exclude`` are account keys to pass over (one just
    limited), and ``prefer`` a provider whose other accounts come first."""
    pin = fleet.pins.get((work.job_id, work.workstream or "", work.role))
    facts = [
        replace(a, max_concurrent=1) if is_probing(fleet.availability.get(a.id), now) else a
        for a in agent_facts(agents, running or Counter(), counts, caps)
    ]  # an agent being probed for its network gets one launch at a time
    return select_agent(
        role=work.role,
        model_class=work.model_class,
        pinned_agent=work.pinned_agent,
        pin=PinFacts(agent_id=pin) if pin else None,
        agents=facts,
        providers=provider_facts(fleet.limits, fleet.watermarks, now),
        now=now,
        exclude_providers=exclude,
        availability=fleet.availability,
        prefer=prefer,
    )


def agent_facts(
    agents: Sequence[AgentConfig],
    running: Counter[str],
    counts: FleetCounts | None = None,
    caps: FleetCaps | None = None,
) -> list[AgentFacts]:
    """``running``: this engine's agents. A fleet-wide cap lowers an agent's own limit to
    what the other engines leave of it."""
    facts = []
    for a in agents:
        limit = a.max_concurrent
        room = counts.room(caps, a.id, a.provider) if counts and caps else None
        if room is not None:
            shared = running[a.id] + max(room, 0)
            limit = shared if limit is None else min(limit, shared)
        facts.append(
            AgentFacts(
                id=a.id,
                provider=a.provider,
                roles=frozenset(a.roles),
                model_class=a.model_class,
                enabled=a.enabled,
                max_concurrent=limit,
                running=running[a.id],
                account=a.account_key,
            )
        )
    return facts


def provider_facts(
    limits: Mapping[str, float],
    watermarks: Mapping[str, Watermark] | None = None,
    now: float = 0.0,
) -> dict[str, ProviderFacts]:
    """Per account key, the later of its limit and its watermark, and why."""
    facts = {p: ProviderFacts(provider=p, limited_until=until) for p, until in limits.items()}
    for key, mark in (watermarks or {}).items():
        limit = facts.get(key)
        limit_until = limit.limited_until if limit is not None else None
        if limit_until is None or limit_until <= now or mark.until > limit_until:
            facts[key] = ProviderFacts(key, mark.until, mark.reason)
    return facts


def is_eligible(agent: AgentFacts, role: str, model_class: str | None) -> bool:
    """An agent without a model class, or a task without one, matches any class."""
    if not agent.enabled or role not in agent.roles:
        return False
    return model_class is None or agent.model_class is None or agent.model_class == model_class


def eligible_agents(
    agents: Iterable[AgentFacts], role: str, model_class: str | None
) -> list[AgentFacts]:
    """Eligible agents in the given (config) order, which is the tie-break order."""
    return [a for a in agents if is_eligible(a, role, model_class)]


def limited_until(
    provider: str, providers: Mapping[str, ProviderFacts], now: float
) -> float | None:
    """The reset time of a provider that is limited right now, else None."""
    facts = providers.get(provider)
    if facts is None or facts.limited_until is None or facts.limited_until <= now:
        return None
    return facts.limited_until


def has_capacity(agent: AgentFacts) -> bool:
    return agent.max_concurrent is None or agent.running < agent.max_concurrent


def select_agent(
    *,
    role: str,
    model_class: str | None,
    pinned_agent: str | None,
    pin: PinFacts | None,
    agents: Sequence[AgentFacts],
    providers: Mapping[str, ProviderFacts],
    now: float,
    exclude_providers: frozenset[str] = frozenset(),
    availability: Mapping[str, Availability] | None = None,
    prefer: str | None = None,
) -> Selection:
    """Pins keep a task (or a workstream) on one agent for continuity, so a pinned agent that is
    merely full makes the task wait rather than move; a limited, excluded or unavailable
    (not logged in, unreachable, CLI missing) agent releases the pin and the task falls through
    to automatic choice."""
    elsewhere = _pinned_elsewhere(pinned_agent, pin, agents)
    if elsewhere is not None:
        return elsewhere
    eligible = eligible_agents(agents, role, model_class)
    if not eligible:
        return NoAgent(_no_agent_reason(role, model_class))
    states = availability or {}

    def usable(agent: AgentFacts) -> bool:
        if agent.key in exclude_providers or not is_available(states.get(agent.id), now):
            return False
        return limited_until(agent.key, providers, now) is None

    for wanted, via in ((pinned_agent, "task-pin"), (pin.agent_id if pin else None, "pin")):
        agent = next((a for a in eligible if a.id == wanted), None)
        if agent is None or not usable(agent):
            continue
        if has_capacity(agent):
            return Selected(agent.id, agent.provider, via)
        return Wait(f"{via} agent {agent.id} is at its limit ({_load(agent)}){LIMITS}")

    usable_agents = [a for a in eligible if usable(a)]
    if usable_agents:
        return _auto(usable_agents, prefer)
    available = [a for a in eligible if is_available(states.get(a.id), now)]
    if not available:
        return _wait_on_agents([states[a.id] for a in eligible])
    return _all_limited(available, providers, now)


def _pinned_elsewhere(
    pinned_agent: str | None, pin: PinFacts | None, agents: Sequence[AgentFacts]
) -> Wait | None:
    """A task (or workstream) pinned to an agent this engine does not define is left to
    an engine that does: it waits in the queue, neither run here by another agent nor
    failed for want of one. The task's own pin is asked first, as in selection."""
    defined = {agent.id for agent in agents}
    wanted = pinned_agent or (pin.agent_id if pin else None)
    via = "task-pin" if pinned_agent else "pin"
    if wanted is None or wanted in defined:
        return None
    return Wait(f"{via} agent {wanted} is not defined on this engine: left to one that defines it")


LIMITS = " (max_concurrent on this engine, or a cluster_max_concurrent/[cluster] cap)"


def _auto(usable: list[AgentFacts], prefer: str | None = None) -> Selection:
    """The least busy free agent, config order breaking ties; agents of ``prefer`` (the
    provider whose other account was just limited) before any other provider's."""
    free = [a for a in usable if has_capacity(a)]
    if free:
        best = min(free, key=lambda a: (prefer is not None and a.provider != prefer, a.running))
        return Selected(best.id, best.provider, "auto")
    busy = ", ".join(f"{a.id} {_load(a)}" for a in usable)
    return Wait(f"all usable agents are at their limits: {busy}{LIMITS}")


def _wait_on_agents(states: list[Availability]) -> Park:
    """Every capable agent is unavailable: wait for the first probe, else for an operator."""
    probing = [s for s in states if s.until is not None]
    first = min(probing, key=lambda s: (s.until, s.agent_id)) if probing else states[0]
    reason = f"waiting on agent {first.agent_id}: {first.reason or first.status}"
    return Park(first.agent_id, first.until, reason, agent=first.agent_id)


def _all_limited(
    eligible: list[AgentFacts], providers: Mapping[str, ProviderFacts], now: float
) -> Selection:
    """Every available agent's account waits: park until the first one may work again,
    with its watermark's words when that is what holds it."""
    resets = {a.key: limited_until(a.key, providers, now) for a in eligible}
    if any(until is None for until in resets.values()):
        excluded = sorted(p for p, until in resets.items() if until is None)
        return Wait(
            f"every eligible provider is limited or excluded (excluded: {', '.join(excluded)})"
        )
    key, until = min(
        ((p, u) for p, u in resets.items() if u is not None), key=lambda pu: (pu[1], pu[0])
    )
    why = providers[key].reason
    if why is not None:
        return Park(key, until, f"{why}; no other account or provider can take it")
    reason = f"all eligible providers are limited; {key} resets first at {_fmt_time(until)}"
    return Park(key, until, reason)


def _no_agent_reason(role: str, model_class: str | None) -> str:
    if model_class is None:
        return f"no enabled agent has role {role!r}"
    return f"no enabled agent has role {role!r} and model class {model_class!r}"


def _load(agent: AgentFacts) -> str:
    return f"{agent.running}/{agent.max_concurrent}"


def _fmt_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
