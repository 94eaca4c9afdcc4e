"""How long an engine woken by an agent's exit waits for the exits about to land with it.

A tick has a cost of its own, whatever it carries: reading the queue, one claim transaction,
one exit transaction. An engine with few slots whose agents got out of step (one started a
tick after the other) pays it once per exit, for batches of one; a fleet of such engines
pays twice the CPU per task of one engine with all the slots. Waiting a little for an
agent that is about to end brings its exit into the same tick, and the slots it frees into
the same claim.

"About to end" is read from the engine's recent agents: one started ``age`` ago is expected
to end when it reaches the median lifetime of the last few that ended. The wait is only
ever that short: when no running agent is expected within ``most`` (agents that work for
minutes never are), it is ``least``, the few milliseconds that exits landing together
anyway take to arrive.

Pure: the engine keeps the lifetimes, and ends the wait early when the exit it waits for
lands.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

LIFETIMES_KEPT = 32
"""How many recent agents' lifetimes the expectation is taken from."""


def gather_for(
    ages: Iterable[float], lifetimes: Sequence[float], *, least: float, most: float
) -> float:
    """Seconds to wait for the soonest expected exit among running agents of these
    ``ages`` (seconds since each started), given recent ``lifetimes``: until it is due,
    plus a quarter of a lifetime for how agents vary, when that is within ``most``;
    otherwise ``least``. An agent already past the median lifetime is due now."""
    if not lifetimes:
        return least
    typical = statistics.median(lifetimes)
    soonest = min((max(typical - age, 0.0) for age in ages), default=None)
    if soonest is None:
        return least
    wait = soonest + typical / 4
    return max(wait, least) if wait <= most else least
