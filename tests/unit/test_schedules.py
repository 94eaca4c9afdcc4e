"""Which slot of a scheduled job is due: time zones, daylight saving, catch-up, and the
schedule fields of a job file."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from relay_engine.contracts.job_file import (
    JobFileError,
    parse_job_text,
    spec_from_stored,
    stored_spec,
)
from relay_engine.contracts.schedules import ScheduleRule
from relay_engine.core.schedules import (
    MAX_COUNTED,
    ON_TIME_SECONDS,
    decide_slots,
    next_slot,
    run_job_id,
    slots_after,
)

NEW_YORK = "America/New_York"


def at(zone: str, *fields: int) -> float:
    return datetime(*fields, tzinfo=ZoneInfo(zone)).timestamp()  # type: ignore[misc]


def labels(rule: ScheduleRule, start: float, hours: float) -> list[str]:
    return [slot.label for slot in slots_after(rule, start, start + hours * 3600, 100)]


def test_a_slot_is_named_by_its_wall_time_in_the_schedules_zone() -> None:
    rule = ScheduleRule("0 9 * * 1-5", "Europe/Berlin")
    slot = next_slot(rule, at("UTC", 2026, 12, 1, 0, 0))  # a Tuesday
    assert slot.label == "20261201T0900"
    assert slot.at == at("UTC", 2026, 12, 1, 8, 0)  # 09:00 in Berlin is 08:00 UTC in winter
    assert run_job_id("report", slot) == "report@20261201T0900"


def test_weekdays_only_skip_the_weekend() -> None:
    rule = ScheduleRule("0 9 * * 1-5")
    friday = at("UTC", 2026, 12, 4, 10, 0)
    assert next_slot(rule, friday).label == "20261207T0900"  # Monday


def test_a_daily_slot_runs_once_on_the_night_clocks_go_back() -> None:
    rule = ScheduleRule("30 1 * * *", NEW_YORK)
    start = at(NEW_YORK, 2026, 10, 31, 12, 0)
    assert labels(rule, start, 72) == ["20261101T0130", "20261102T0130", "20261103T0130"]
    first = slots_after(rule, start, start + 86400, 1)[0]
    # deciding from the first 01:30 on, the second 01:30 (an hour later) is not a new slot
    assert labels(rule, first.at, 30) == ["20261102T0130"]


def test_hourly_slots_keep_one_name_per_wall_hour_when_clocks_go_back() -> None:
    rule = ScheduleRule("0 * * * *", NEW_YORK)
    start = at(NEW_YORK, 2026, 11, 1, 0, 0)
    assert labels(rule, start, 5) == [
        "20261101T0100",
        "20261101T0200",
        "20261101T0300",
        "20261101T0400",
    ]


def test_a_wall_time_clocks_jump_over_runs_when_they_jump() -> None:
    rule = ScheduleRule("30 2 * * *", NEW_YORK)
    start = at(NEW_YORK, 2026, 3, 7, 12, 0)
    assert labels(rule, start, 72) == ["20260308T0300", "20260309T0230", "20260310T0230"]


def test_nothing_due_leaves_the_cursor_alone() -> None:
    rule = ScheduleRule("0 9 * * *")
    cursor = at("UTC", 2026, 12, 1, 9, 30)
    decision = decide_slots(rule, cursor, cursor + 3600)
    assert decision.run is None and decision.missed == 0 and decision.cursor == cursor


def test_a_slot_found_on_time_runs_and_moves_the_cursor_to_it() -> None:
    rule = ScheduleRule("0 9 * * *")
    nine = at("UTC", 2026, 12, 1, 9, 0)
    decision = decide_slots(rule, nine - 3600, nine + 2)
    assert decision.run is not None and decision.run.label == "20261201T0900"
    assert decision.missed == 0 and decision.cursor == nine
    assert decide_slots(rule, decision.cursor, nine + 10).run is None  # decided once


@pytest.mark.parametrize("catch_up", ["last", "none"])
def test_slots_missed_while_no_engine_ran_are_counted_not_replayed(catch_up: str) -> None:
    rule = ScheduleRule("0 9 * * *", "UTC", catch_up)  # type: ignore[arg-type]
    cursor = at("UTC", 2026, 11, 28, 10, 0)
    now = at("UTC", 2026, 12, 1, 12, 0)  # Nov 29, 30 and Dec 1 at 09:00 passed, unseen
    decision = decide_slots(rule, cursor, now)
    assert decision.cursor == at("UTC", 2026, 12, 1, 9, 0)
    assert decision.first_missed is not None and decision.first_missed.label == "20261129T0900"
    if catch_up == "last":
        assert decision.run is not None and decision.run.label == "20261201T0900"
        assert decision.missed == 2
        assert decision.last_missed is not None and decision.last_missed.label == "20261130T0900"
    else:
        assert decision.run is None and decision.missed == 3


def test_catch_up_none_still_runs_the_latest_slot_when_it_is_on_time() -> None:
    rule = ScheduleRule("0 * * * *", "UTC", "none")
    cursor = at("UTC", 2026, 12, 1, 6, 30)
    now = at("UTC", 2026, 12, 1, 9, 0) + ON_TIME_SECONDS
    decision = decide_slots(rule, cursor, now)
    assert decision.run is not None and decision.run.label == "20261201T0900"
    assert decision.missed == 2  # 07:00 and 08:00


def test_an_every_minute_schedule_down_for_months_counts_up_to_a_cap() -> None:
    rule = ScheduleRule("* * * * *")
    now = at("UTC", 2026, 12, 1, 9, 0)
    decision = decide_slots(rule, now - 90 * 86400, now)
    assert decision.missed_capped and decision.missed == MAX_COUNTED
    assert decision.run is not None and decision.run.label == "20261201T0900"
    assert decision.cursor == now


def job_text(**job: str) -> str:
    fields = "".join(f'{key} = "{value}"\n' for key, value in job.items())
    return f'[job]\nid = "nightly"\n{fields}\n[[tasks]]\nid = "t"\ninput = "x"\n'


def test_a_job_file_with_a_schedule_keeps_its_rule_and_round_trips_as_stored() -> None:
    spec = parse_job_text(
        job_text(schedule="0 2 * * *", timezone="Europe/Berlin", catch_up="none"),
        Path("nightly.toml"),
    )
    assert (spec.job.schedule, spec.job.timezone, spec.job.catch_up) == (
        "0 2 * * *",
        "Europe/Berlin",
        "none",
    )
    again = spec_from_stored(stored_spec(spec), spec.source)
    assert again.spec_hash() == spec.spec_hash()


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ({"schedule": "0 9 * *"}, "job.schedule: '0 9 * *' has 4 fields; a cron expression has 5"),
        ({"schedule": "0 25 * * *"}, "job.schedule: '0 25 * * *' is not a cron expression"),
        (
            {"schedule": "0 9 * * *", "timezone": "Mars/Olympus"},
            "job.timezone: 'Mars/Olympus' is not a time zone name",
        ),
        ({"timezone": "Europe/Berlin"}, "job.timezone: only means something with job.schedule"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_field_and_the_problem(
    job: dict[str, str], expected: str
) -> None:
    with pytest.raises(JobFileError) as caught:
        parse_job_text(job_text(**job), Path("nightly.toml"))
    assert expected in str(caught.value)
    assert str(caught.value).startswith("nightly.toml: job.")
