"""The engines on a database as rows: live, or gone once stopped or silent past one lease;
which gone engines are still listed; ages as they are read.
"""

from __future__ import annotations

from typing import Any

import pytest

from relay_engine.store.engines import age_text, capacity_cell, engine_rows
from relay_engine.store.schema import EngineRecord

LEASE = 3.0
NOW = 10_000.0


def _record(engine_id: str, *, heartbeat: float, started: float = 0.0, **more: Any) -> EngineRecord:
    return EngineRecord(
        id=engine_id, host="h", pid=1, started_at=started, heartbeat_at=heartbeat, **more
    )


@pytest.mark.parametrize(
    ("heartbeat", "stopped", "state", "why"),
    [
        (NOW, None, "live", None),
        (NOW - LEASE, None, "live", None),  # silent for exactly one lease: not yet
        (NOW - LEASE - 0.1, None, "gone", "silent"),
        (NOW, NOW - 1, "gone", "stopped"),
    ],
)
def test_an_engine_is_gone_once_stopped_or_silent_past_one_lease(
    heartbeat: float, stopped: float | None, state: str, why: str | None
) -> None:
    record = _record("e", heartbeat=heartbeat, stopped_at=stopped)
    (row,) = engine_rows([record], {"e": 2}, now=NOW, lease_seconds=LEASE)
    assert (row.state, row.why_gone) == (state, why)
    assert row.running == (0 if why == "stopped" else 2)  # a stopped engine released its work


def test_live_engines_come_first_and_long_gone_ones_only_when_asked() -> None:
    records = [
        _record("old-gone", heartbeat=NOW - 3 * 86400),
        _record("late", heartbeat=NOW, started=20),
        _record("recent-gone", heartbeat=NOW - 60),
        _record("early", heartbeat=NOW, started=10),
    ]
    rows = engine_rows(records, {}, now=NOW, lease_seconds=LEASE)
    assert [r.id for r in rows] == ["early", "late", "recent-gone"]
    every = engine_rows(records, {}, now=NOW, lease_seconds=LEASE, recent_seconds=None)
    assert [r.id for r in every][-1] == "old-gone"
    assert capacity_cell(rows[0]) == "0/?"  # slots this engine did not record


def test_ages_read_short() -> None:
    assert [age_text(s) for s in (4, 119, 600, 7200, 3 * 86400)] == [
        "4s",
        "119s",
        "10m",
        "2h",
        "3d",
    ]
