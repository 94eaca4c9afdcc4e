"""What the tick's steps share with the engine that runs them.

The starter, the reaper and the planner rounds each need a few of the engine's facts
(its id, store, workspace, current config, live processes) and a way to tell it a job
needs settling. They get exactly that, not the :class:`~relay_engine.loop.engine.Engine`:
the steps stay readable on their own and nothing imports the engine back.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlmodel import Session

from relay_engine.contracts.config import RelayConfig
from relay_engine.core.landing import LIFETIMES_KEPT, gather_for
from relay_engine.core.recovery import ClaimFacts, Recovery, decide_recoveries
from relay_engine.core.redaction import Redactor
from relay_engine.core.selection import FleetView
from relay_engine.core.turns import Place
from relay_engine.git.worktrees import Worktrees
from relay_engine.loop.live import FinishedExecution, LiveExecution
from relay_engine.store.db import Store
from relay_engine.store.engines import owner_facts
from relay_engine.store.read_model.fleet import read_fleet

EXITS_LAND_TOGETHER_S = 0.005
"""How long a wake waits for the exits that land with the one that woke it: agents started
together often end together, and a tick has a cost of its own (the queue read, the claim,
the exit write) whether it writes one exit or all of them."""

EXITS_EXPECTED_WITHIN_S = 0.02
"""How far ahead a wake waits for a running agent expected to end (see
:mod:`~relay_engine.core.landing`): agents that live a few milliseconds pair their exits;
agents that work for minutes are never expected this soon."""


@dataclass
class EngineRuntime:
    """One engine's shared, mutable state. ``config`` and ``redactor`` change on reload."""

    engine_id: str
    host: str
    workspace: Path
    store: Store
    config: RelayConfig
    wake: Callable[..., None]
    worktrees: Worktrees
    clock: Callable[[], float] = time.time  # the engine's clock, which leases are on
    redactor: Redactor = field(init=False)
    live: dict[str, LiveExecution] = field(default_factory=dict)
    exited: dict[str, FinishedExecution] = field(default_factory=dict)
    # Where started agents run (their execution rows' spawn values), for the next write.
    unwritten_spawns: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirty_jobs: set[str] = field(default_factory=set)
    place: Place = field(default_factory=Place)  # among the live engines, per heartbeat
    condition: str | None = None  # "disk full" / "database busy": why the engine is held up
    _fleet: FleetView | None = field(default=None, init=False, repr=False)
    generation: int = field(default=0, init=False)  # counts forget_fleet calls
    lifetimes: deque[float] = field(default_factory=lambda: deque(maxlen=LIFETIMES_KEPT))
    _unready: frozenset[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.use_config(self.config)

    def use_config(self, config: RelayConfig) -> None:
        """Adopt a (re)loaded config and the secret values its agents' env holds."""
        self.config = config
        self.redactor = Redactor.for_agents(a.env for a in config.agents)
        self.forget_fleet()

    def fleet_view(
        self, session: Session, now: float, pins: dict[tuple[str, str, str], str]
    ) -> FleetView:
        """Limited providers and agents that cannot work, read once and kept until
        :meth:`forget_fleet`: on each of this engine's turns at the fleet's housekeeping
        (so another engine's limits are seen within one turn of the fleet: a full tick per
        engine), and whenever this engine records what changes them. A dispatch of a fast
        tick, one per agent exit, reads none of it again."""
        if self._fleet is None:
            self._fleet = read_fleet(session, self.config, now)
            self._unready = frozenset(self._fleet.availability)
        return replace(self._fleet, pins=pins)

    def forget_fleet(self) -> None:
        self._fleet = None
        self.generation += 1  # what the starter kept since the last forget goes too

    def may_be_unavailable(self, agent_id: str) -> bool:
        """Whether the agent's status row may say it cannot work (so a run that got through
        has something to clear); False only when the last fleet view read said it is ready
        (a mark another engine made since is cleared by the next run after the next read)."""
        return self._unready is None or agent_id in self._unready

    def settle_later(self, job_id: str) -> None:
        """The job's tasks changed: the next tick decides whether the job is finished."""
        self.dirty_jobs.add(job_id)

    def deadline_after(self, lease_until: float) -> float:
        """Seconds from now an agent may run on a lease that ends at ``lease_until``: its
        supervisor's deadline, two heartbeats short of the lease."""
        engine = self.config.engine
        return lease_until - 2 * engine.heartbeat_seconds - self.clock()

    def extend_deadlines(self, lease_until: float, renewed: set[str]) -> None:
        """The leases of the ``renewed`` executions now end at ``lease_until`` (committed):
        their supervisors may let them run that much longer, and no longer. A live
        execution whose row was not renewed (its task moved on) keeps its old deadline."""
        seconds = self.deadline_after(lease_until)
        for execution_id, live in list(self.live.items()):
            if execution_id in renewed:
                live.process.extend_deadline(seconds)

    def note_ended(self, live: LiveExecution) -> None:
        """How long an agent that ended lived, for when the next ones are expected to end."""
        process = live.process
        if process.ended_at is not None:
            self.lifetimes.append(process.ended_at - process.started_at)

    def gather_seconds(self) -> float:
        """Seconds a wake waits for the exits about to land with it (never under
        :data:`EXITS_LAND_TOGETHER_S`)."""
        now = time.time()  # the processes' clock, not the engine's
        ages = [
            now - lv.process.started_at for lv in self.live.values() if lv.process.poll() is None
        ]
        return gather_for(
            ages, self.lifetimes, least=EXITS_LAND_TOGETHER_S, most=EXITS_EXPECTED_WITHIN_S
        )

    def own_claims(self) -> int:
        """Task executions this engine holds (planners do not take a slot): only this engine
        claims against its slots, so when these fill them there is nothing to dispatch."""
        return sum(self.own_claims_by_agent().values())

    def own_claims_by_agent(self) -> Counter[str]:
        """:meth:`own_claims` by agent: running, or exited and not yet written (their tasks'
        claims stand until then), as the database would count this engine's."""
        held = [*self.live.values(), *(ex.live for ex in self.exited.values())]
        return Counter(live.agent_id for live in held if live.plan_id is None)

    def held(self) -> frozenset[str]:
        """Executions this engine still answers for: running, or exited but not yet written.

        An exit whose write failed (disk full, database busy) stays ours until it is
        written, so its lease keeps being renewed and nobody recovers it meanwhile.
        """
        return frozenset(self.live) | frozenset(self.exited)

    def lost_claims(self, claims: list[ClaimFacts], now: float) -> list[Recovery]:
        """Claims whose runner is gone (dead engine, silent host) or whose lease expired."""
        if not claims:
            return []
        with self.store.read() as session:
            owners = owner_facts(session, {c.owner or "" for c in claims}, self.host)
        return decide_recoveries(
            claims,
            owners,
            my_engine=self.engine_id,
            my_live=self.held(),
            my_host=self.host,
            now=now,
            ttl=self.config.engine.lease_seconds,
            max_recoveries=self.config.engine.max_recoveries,
        )
