"""Named instants where a chaos test can kill or pause this engine.

A random ``kill -9`` rarely lands between two particular statements; the instants that
matter most (an agent spawned but not yet recorded, a claim lock held) get a name here,
and ``RELAY_CRASH_AT`` arms them::

    RELAY_CRASH_AT="spawned:kill:0.2"            # SIGKILL self there, 20 % of the times
    RELAY_CRASH_AT="claim-locked:stop:once"      # SIGSTOP self there, the first time only

Unset (always, outside tests) every :func:`crash_point` is a dictionary lookup.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from dataclasses import dataclass
from functools import cache

ENV = "RELAY_CRASH_AT"
ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}


@dataclass
class _Armed:
    signal: int
    probability: float
    once: bool
    fired: bool = False


@cache
def _armed(spec: str) -> dict[str, _Armed]:
    points: dict[str, _Armed] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, action, chance = (*item.split(":"), "", "")[:3]
        action, chance = action or "kill", chance or "1"
        once = chance == "once"
        points[name] = _Armed(ACTIONS[action], 1.0 if once else float(chance), once)
    return points


def crash_point(name: str) -> None:
    """Kill or stop this process here when a test armed ``name``; otherwise do nothing."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    armed = _armed(spec).get(name)
    if armed is None or (armed.once and armed.fired) or random.random() >= armed.probability:
        return
    armed.fired = True
    action = "kill" if armed.signal == signal.SIGKILL else "stop"
    sys.stderr.write(f"relay: crash point {name}: {action} pid {os.getpid()} ({ENV})\n")
    sys.stderr.flush()
    os.kill(os.getpid(), armed.signal)
