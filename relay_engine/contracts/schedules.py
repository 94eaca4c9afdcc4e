"""Schedules as operators write them: ``schedule = "0 9 * * 1-5"`` in a job file's ``[job]``,
with ``timezone`` and ``catch_up``, checked before anything is stored.

A job file with a schedule is a template: every slot its cron expression names becomes a
run of its own, the job ``<id>@<slot>`` (:mod:`relay_engine.core.schedules` decides which).
The expression is read by croniter, never by a parser of relay's own, and only its five
standard fields are accepted: croniter reads a sixth as seconds, which no operator who
wrote a crontab line expects.

Pure except that :func:`schedule_problems` reads the time zone database (zoneinfo) to
check the zone's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterError

CatchUp = Literal["last", "none"]
"""What a restart does with the slots that passed while no engine ran: ``last`` runs the
latest of them (late), ``none`` runs none; either way the others are reported missed."""

CRON_FIELDS = ("minute", "hour", "day of month", "month", "day of week")


@dataclass(frozen=True)
class ScheduleRule:
    """One template's timing: the cron expression, its zone and its catch-up policy."""

    cron: str
    timezone: str = "UTC"
    catch_up: CatchUp = "last"


def cron_problem(expression: str) -> str | None:
    """Why croniter will not take ``expression`` as five cron fields, or None."""
    fields = expression.split()
    if len(fields) != len(CRON_FIELDS):
        return (
            f"{expression!r} has {len(fields)} fields; a cron expression has 5 "
            f"({' '.join(CRON_FIELDS)}), e.g. '0 9 * * 1-5'"
        )
    try:
        croniter(expression)
    except (CroniterError, ValueError, KeyError) as error:
        return f"{expression!r} is not a cron expression croniter accepts: {error}"
    return None


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone (``Europe/Berlin``, ``UTC``), or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not a time zone name (an IANA name such as 'Europe/Berlin' or 'UTC')"
    return None


def schedule_problems(rule: ScheduleRule) -> list[tuple[str, str]]:
    """(field, problem) for each part of ``rule`` that cannot be used, fields as in ``[job]``."""
    problems = []
    cron = cron_problem(rule.cron)
    if cron is not None:
        problems.append(("schedule", cron))
    zone = timezone_problem(rule.timezone)
    if zone is not None:
        problems.append(("timezone", zone))
    return problems
