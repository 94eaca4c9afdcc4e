"""Which slot of a scheduled job is due now, and what the slots no engine saw become.

A template keeps a cursor: every slot at or before it is decided. On a full tick the
engine asks :func:`decide_slots` about the slots after the cursor up to ``now``. One on
time (at most ``on_time`` seconds late) runs. Slots that passed while no engine ran are
never all replayed -- a daily report down for a week does not want seven runs at once:
``catch_up = "last"`` runs the latest of them, late; ``catch_up = "none"`` runs none; the
rest are counted as missed, for an event and ``relay schedules``.

A slot is named by its wall time in the schedule's zone, ``20261201T0900``, and the run it
starts is the job ``<template>@<slot>``: the job id is the unique key that keeps two
engines from starting one slot twice. Daylight saving follows from that name: when clocks
go back the repeated wall time is one slot (run at its first occurrence), and a wall time
that never happens (clocks go forward) runs when the clock jumps over it, as croniter
places it.

Pure: ``now`` and the cursor are parameters; reads the time zone database (zoneinfo).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import croniter

from relay_engine.contracts.schedules import ScheduleRule

ON_TIME_SECONDS = 300.0
"""A slot found at most this late still counts as on time: engines tick every few seconds,
so only an engine that was not running finds a slot later than this."""

MAX_COUNTED = 10_000
"""Missed slots counted one by one at most; past this, ``missed_capped`` says "more"."""

LABEL_FORMAT = "%Y%m%dT%H%M"


@dataclass(frozen=True)
class Slot:
    """One instant a cron expression names: when (epoch seconds) and its wall-time name."""

    at: float
    label: str


@dataclass(frozen=True)
class SlotDecision:
    """What to do with the slots after the cursor: run one, count the others missed."""

    run: Slot | None
    missed: int
    first_missed: Slot | None
    last_missed: Slot | None
    cursor: float
    missed_capped: bool = False


def slot_label(at: float, timezone: str) -> str:
    """``20261201T0900``: the slot's wall time in the schedule's zone."""
    return datetime.fromtimestamp(at, ZoneInfo(timezone)).strftime(LABEL_FORMAT)


def run_job_id(template: str, slot: Slot) -> str:
    """The id of the run a slot starts, unique per slot across every engine."""
    return f"{template}@{slot.label}"


def slots_after(rule: ScheduleRule, after: float, until: float, limit: int) -> list[Slot]:
    """The slots in ``(after, until]``, at most ``limit`` of them, one per wall-time name."""
    zone = ZoneInfo(rule.timezone)
    moments = croniter(rule.cron, datetime.fromtimestamp(after, zone))
    seen = {slot_label(after, rule.timezone)}
    slots: list[Slot] = []
    while len(slots) < limit:
        moment = moments.get_next(datetime)
        at = moment.timestamp()
        if at > until:
            break
        label = moment.strftime(LABEL_FORMAT)
        if label not in seen:  # the hour clocks go back over: its second pass is not a slot
            seen.add(label)
            slots.append(Slot(at, label))
    return slots


def next_slot(rule: ScheduleRule, after: float) -> Slot:
    """The first slot after ``after`` (what ``relay schedules`` shows as next)."""
    slots = slots_after(rule, after, float("inf"), 1)
    return slots[0]


def latest_slot(rule: ScheduleRule, until: float) -> Slot:
    """The last slot at or before ``until``."""
    zone = ZoneInfo(rule.timezone)
    moment = croniter(rule.cron, datetime.fromtimestamp(until + 1, zone)).get_prev(datetime)
    return Slot(moment.timestamp(), moment.strftime(LABEL_FORMAT))


def decide_slots(
    rule: ScheduleRule, cursor: float, now: float, *, on_time: float = ON_TIME_SECONDS
) -> SlotDecision:
    """Which slot after ``cursor`` runs now, and how many are missed; the new cursor.

    Nothing due leaves the cursor where it is. Otherwise the cursor moves to the latest
    due slot, whether it ran or not, so no slot is decided twice."""
    slots = slots_after(rule, cursor, now, MAX_COUNTED + 1)
    if not slots:
        return SlotDecision(None, 0, None, None, cursor)
    capped = len(slots) > MAX_COUNTED
    latest = latest_slot(rule, now) if capped else slots[-1]
    earlier = slots[:MAX_COUNTED] if capped else slots[:-1]
    late = now - latest.at > on_time
    if rule.catch_up == "none" and late:
        run, missed = None, [*earlier, latest]
    else:
        run, missed = latest, earlier
    return SlotDecision(
        run=run,
        missed=len(missed),
        first_missed=missed[0] if missed else None,
        last_missed=missed[-1] if missed else None,
        cursor=latest.at,
        missed_capped=capped,
    )
