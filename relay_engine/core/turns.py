"""Whose turn it is to do the fleet's housekeeping.

Promoting drafts, taking back lost claims, resuming parked work, advancing planned jobs and
pull requests: any engine may do them for the whole fleet, and all do them safely at once.
If every engine did them on every full tick, what a fleet reads per second would grow with
its size while the work did not. So the engines take turns, one tick slot each: the fleet
still does its housekeeping once a tick, whatever its size. Turns need no coordination
beyond each engine knowing its place among the live engines; a place that is a little stale
(an engine joined or died since) only makes two engines share a slot or leaves one slot
empty until the next heartbeat re-reads it.

Pure: the engine (:mod:`relay_engine.loop.engine`) reads the live engines and does the chores.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Place:
    """An engine's position among the live engines of its database (0-based), and how
    many there are."""

    rank: int = 0
    size: int = 1

    @classmethod
    def among(cls, engine_id: str, live_ids: list[str]) -> Place:
        ordered = sorted({*live_ids, engine_id})
        return cls(ordered.index(engine_id), len(ordered))


def takes_turn(place: Place, now: float, tick_seconds: float) -> bool:
    """Whether the tick slot ``now`` falls in is this engine's."""
    if place.size <= 1:
        return True
    return int(now // tick_seconds) % place.size == place.rank
