"""Quota window rows: what an account's CLI said of its plan's windows, kept per account.

The decision (:func:`relay_engine.core.quota.watermark`) is pure; this module upserts the
readings a running agent reports and says so, once, when an account crosses its watermark:
from then on no new task starts on it until the window resets.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session

from relay_engine.contracts.accounts import split_key
from relay_engine.core.quota import QuotaReading, Watermark, watermark
from relay_engine.store.db import ensure_row
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.read_model.providers import quota_windows
from relay_engine.store.schema import QuotaWindow


def record_windows(
    session: Session,
    key: str,
    readings: Iterable[QuotaReading],
    *,
    agent_id: str,
    stop_at: float,
    now: float,
) -> Watermark | None:
    """Keep ``readings`` for account ``key``; the watermark that holds it now, if any (an
    event announces it the moment it starts holding)."""
    readings = list(readings)
    if not readings:
        return None
    before = watermark(quota_windows(session, [key]).get(key, []), stop_at, now)
    provider, account = split_key(key)
    for reading in readings:
        ensure_row(session, QuotaWindow, key=key, window=reading.window)
        row = session.get(QuotaWindow, (key, reading.window))
        assert row is not None
        row.provider, row.account, row.agent, row.observed_at = provider, account, agent_id, now
        row.status, row.utilization = reading.status, reading.utilization
        row.resets_at, row.window_minutes = reading.resets_at, reading.window_minutes
        row.threshold, row.overage = reading.threshold, reading.overage
        session.add(row)
    session.flush()
    after = watermark(quota_windows(session, [key]).get(key, []), stop_at, now)
    if after is not None and (before is None or before.window != after.window):
        record_event(
            session,
            EventKind.PROVIDER_QUOTA,
            f"{after.reason}: no new task starts on it until then",
            now=now,
            level="warning",
            data={"provider": key, "window": after.window, "until": after.until,
                  "utilization": after.utilization},
        )  # fmt: skip
    return after
