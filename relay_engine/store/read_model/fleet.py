"""The fleet as agent selection sees it: limited accounts, agents that cannot work, pins and
accounts over their quota watermark, read in one :class:`FleetView`.

The engine picks agents with it (its runtime, the reaper, a failed agent's task looking
for another), and dispatch reads the pins; it is built from the same reads the operator's
views are (:mod:`.agents`, :mod:`.providers`), so what relay does and what it shows agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlmodel import Session, col, select

from relay_engine.contracts.config import RelayConfig
from relay_engine.core.selection import FleetView
from relay_engine.store.read_model.agents import availability_map, shared_logins
from relay_engine.store.read_model.providers import limited_providers, watermarks
from relay_engine.store.schema import Assignment
from relay_engine.store.spend import agent_holds


def read_fleet(
    session: Session,
    config: RelayConfig | None = None,
    now: float | None = None,
    *,
    pins: Mapping[tuple[str, str, str], str] | None = None,
) -> FleetView:
    """What agent selection decides on: limited accounts, agents that cannot work (with
    those whose daily budget is spent, and those sharing a named account's failed login,
    when ``config`` and ``now`` are given), pins, and accounts over their watermark (when
    ``now`` is given)."""
    availability = availability_map(session)
    if config is not None:
        availability = shared_logins(availability, config.agents)
    if config is not None and now is not None:
        availability |= agent_holds(session, config, now)
    held = watermarks(session, config, now) if now is not None else {}
    return FleetView(limited_providers(session), availability, pins or {}, held)


def active_pins(session: Session, job_ids: Iterable[str]) -> dict[tuple[str, str, str], str]:
    """(job, workstream, role) -> the agent pinned to it."""
    query = select(Assignment).where(
        col(Assignment.job_id).in_(sorted(set(job_ids))), Assignment.status == "active"
    )
    return {(a.job_id, a.workstream, a.role): a.agent_id for a in session.exec(query)}
