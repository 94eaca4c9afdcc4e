"""How many agents may start: this engine's slots, and the caps the whole fleet shares.

Capacity belongs to the engine: ``[engine] max_concurrent_agents`` counts what *this*
engine runs, so each host added to a PostgreSQL fleet adds its slots. What the fleet
shares is capped separately and only when asked: ``[cluster] max_running`` over every
engine, and ``cluster_max_concurrent`` per agent or per provider for an account whose
concurrency is limited wherever it runs from.

Pure: dispatch gathers the counts and takes the advisory locks named here.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from relay_engine.contracts.config import RelayConfig

CLUSTER_LOCK = "cluster"


@dataclass(frozen=True)
class FleetCaps:
    """The caps shared by every engine on the database (None / absent: no cap)."""

    max_running: int | None = None
    agents: dict[str, int] = field(default_factory=dict)
    providers: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: RelayConfig) -> FleetCaps:
        return cls(
            max_running=config.cluster.max_running,
            agents={
                a.id: a.cluster_max_concurrent
                for a in config.agents
                if a.cluster_max_concurrent is not None
            },
            providers={
                name: p.cluster_max_concurrent
                for name, p in config.providers.items()
                if p.cluster_max_concurrent is not None
            },
        )

    def any(self) -> bool:
        """Whether a cap is set: then the fleet's claims count, not only this engine's."""
        return self.max_running is not None or bool(self.agents) or bool(self.providers)

    def lock_names(self, picks: Iterable[tuple[str, str]]) -> list[str]:
        """The fleet-wide counts a claim of these (agent, provider) picks must hold still,
        sorted so that engines always take them in the same order."""
        names = {CLUSTER_LOCK} if self.max_running is not None else set()
        for agent, provider in picks:
            if agent in self.agents:
                names.add(f"agent:{agent}")
            if provider in self.providers:
                names.add(f"provider:{provider}")
        return sorted(names)


def lock_key(name: str) -> int:
    """A stable advisory-lock key for a cap (PostgreSQL takes a 64-bit integer)."""
    return 0x72656C6100000000 | zlib.crc32(name.encode())


def free_slots(slots: int, mine: int, fleet: int, max_running: int | None) -> int:
    """Agents this engine may start now: its own free slots, within the fleet's cap."""
    free = slots - mine
    if max_running is not None:
        free = min(free, max_running - fleet)
    return max(free, 0)


@dataclass
class FleetCounts:
    """What runs on every engine, by agent and by provider; updated as claims are made."""

    total: int = 0
    agents: Counter[str] = field(default_factory=Counter)
    providers: Counter[str] = field(default_factory=Counter)

    def add(self, agent: str | None, provider: str | None) -> None:
        self.total += 1
        if agent:
            self.agents[agent] += 1
        if provider:
            self.providers[provider] += 1

    def room(self, caps: FleetCaps, agent: str, provider: str) -> int | None:
        """How many more of this agent the fleet allows (None: no fleet-wide cap on it)."""
        rooms = [
            cap - used
            for cap, used in (
                (caps.max_running, self.total),
                (caps.agents.get(agent), self.agents[agent]),
                (caps.providers.get(provider), self.providers[provider]),
            )
            if cap is not None
        ]
        return min(rooms) if rooms else None
