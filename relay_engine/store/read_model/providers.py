"""Accounts' usage limits and quota windows: which accounts are limited and until when, how
full each window is, and the watermarks above which an account's windows hold new work back.

The Providers pane's gauges read :func:`read_quota`; agent selection and ``relay agents``
read the same windows through :func:`watermarks` and :func:`limited_providers`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.contracts.accounts import split_key
from relay_engine.contracts.config import ProviderConfig, RelayConfig
from relay_engine.core.quota import QuotaReading, Watermark, watermark, window_label
from relay_engine.core.quota import QuotaWindow as Window
from relay_engine.store.schema import ProviderLimit, QuotaWindow

DEFAULT_STOP_AT = ProviderConfig().stop_at  # with no relay.toml at hand


@dataclass(frozen=True, slots=True)
class LimitView:
    """A usage limit on one account: ``provider`` and ``account`` ("" for the provider's
    default account), ``key`` what tasks waiting on it name (``claude/work``)."""

    provider: str
    status: str
    reset_at: float | None
    source_text: str | None
    account: str = ""
    key: str = ""


def read_limits(session: Session) -> list[LimitView]:
    rows = session.exec(select(ProviderLimit).order_by(col(ProviderLimit.provider)))
    return [_limit_view(row) for row in rows]


def _limit_view(row: ProviderLimit) -> LimitView:
    provider, account = split_key(row.provider)  # the row's key is the account's
    return LimitView(provider, row.status, row.reset_at, row.source_text, account, row.provider)


# -- quota windows --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QuotaView:
    """One account's quota window, for a gauge: how full (``utilization`` 0..1, None when
    the CLI has not said), which window (``label`` "five-hour"), when it resets, and whether
    it holds new work back right now (``holding``, above ``stop_at``, until ``until``)."""

    key: str
    provider: str
    account: str
    window: str
    label: str
    status: str
    utilization: float | None
    resets_at: float | None
    window_minutes: int | None
    threshold: float | None
    observed_at: float
    stop_at: float
    holding: bool = False
    until: float | None = None
    reason: str | None = None  # "claude/work at 96% of its five-hour window until 17:10"
    agent: str | None = None


def quota_windows(session: Session, keys: Iterable[str] | None = None) -> dict[str, list[Window]]:
    """account key -> its windows as the decisions read them."""
    query = select(QuotaWindow).order_by(col(QuotaWindow.key), col(QuotaWindow.window))
    if keys is not None:
        query = query.where(col(QuotaWindow.key).in_(sorted(set(keys))))
    found: dict[str, list[Window]] = {}
    for row in session.exec(query):
        found.setdefault(row.key, []).append(_window(row))
    return found


def _window(row: QuotaWindow) -> Window:
    reading = QuotaReading(
        window=row.window, status=row.status, utilization=row.utilization,
        resets_at=row.resets_at, window_minutes=row.window_minutes, threshold=row.threshold,
        overage=row.overage,
    )  # fmt: skip
    return Window(row.key, reading, row.observed_at)


def watermarks(session: Session, config: RelayConfig | None, now: float) -> dict[str, Watermark]:
    """Accounts whose quota holds new work back at ``now`` (each at its own stop_at)."""
    held = {}
    for key, windows in quota_windows(session).items():
        stop_at = config.stop_at(key) if config is not None else DEFAULT_STOP_AT
        mark = watermark(windows, stop_at, now)
        if mark is not None:
            held[key] = mark
    return held


def read_quota(
    session: Session, config: RelayConfig | None = None, now: float | None = None
) -> list[QuotaView]:
    """Every account's windows, by account and window (what a Providers-pane gauge reads)."""
    rows = list(
        session.exec(select(QuotaWindow).order_by(col(QuotaWindow.key), col(QuotaWindow.window)))
    )
    views = []
    for row in rows:
        stop_at = config.stop_at(row.key) if config is not None else DEFAULT_STOP_AT
        mark = watermark([_window(row)], stop_at, now) if now is not None else None
        views.append(
            QuotaView(
                key=row.key, provider=row.provider, account=row.account, window=row.window,
                label=window_label(row.window), status=row.status, utilization=row.utilization,
                resets_at=row.resets_at, window_minutes=row.window_minutes,
                threshold=row.threshold, observed_at=row.observed_at, stop_at=stop_at,
                holding=mark is not None, until=mark.until if mark else None,
                reason=mark.reason if mark else None, agent=row.agent,
            )
        )  # fmt: skip
    return views


def limited_providers(session: Session) -> dict[str, float]:
    """Providers marked limited, and until when (selection judges whether that is past)."""
    rows = session.exec(select(ProviderLimit).where(col(ProviderLimit.status) == "limited"))
    return {row.provider: row.reset_at or 0.0 for row in rows}
