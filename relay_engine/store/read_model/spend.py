"""Spend as the views show it: the tokens and dollars of jobs' or tasks' executions, or of
every run since a time (today's, for a header), summed by the database.

A :class:`SpendView` also says whether part of a cost came from the price table and which
models ran. The budget holds dispatch decides on (a job's cap, a daily budget) are summed
in :mod:`relay_engine.store.spend`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func
from sqlmodel import Session, col, select

from relay_engine.store.db import ColumnsSelect, chunks, select_columns
from relay_engine.store.schema import Execution


@dataclass(frozen=True, slots=True)
class SpendView:
    """Tokens and dollars of some executions; ``estimated`` when part of the cost came from
    the price table (shown with a ``~``); ``unpriced`` executions used tokens of a model
    without a price."""

    cost_usd: float = 0.0
    estimated: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    executions: int = 0
    unpriced: int = 0
    models: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def of_execution(cls, row: Execution) -> SpendView:
        if row.cost_usd is None and not row.input_tokens and not row.output_tokens:
            return NO_SPEND
        return cls(
            cost_usd=row.cost_usd or 0.0,
            estimated=row.cost_estimated,
            input_tokens=row.input_tokens or 0,
            output_tokens=row.output_tokens or 0,
            cached_tokens=row.cached_tokens or 0,
            executions=1,
            models=(row.model,) if row.model else (),
        )


NO_SPEND = SpendView()


def spend_by(
    session: Session,
    column: Any,
    keys: Iterable[str] | None = None,
    *,
    with_models: bool = False,
) -> dict[str, SpendView]:
    """Spend of every started execution grouped by ``column`` (``Execution.job_id`` or
    ``Execution.task_key``); ``keys`` limits the groups read (None: all)."""
    tokens = func.coalesce(Execution.input_tokens, 0) + func.coalesce(Execution.output_tokens, 0)
    unpriced = case((col(Execution.cost_usd).is_(None) & (tokens > 0), 1), else_=0)
    priced = col(Execution.cost_usd).is_not(None)
    estimated = case((priced & col(Execution.cost_estimated), 1), else_=0)  # no max(bool) in PG
    query = select_columns(
        column,
        func.sum(func.coalesce(Execution.cost_usd, 0.0)),
        func.max(estimated),
        func.sum(func.coalesce(Execution.input_tokens, 0)),
        func.sum(func.coalesce(Execution.output_tokens, 0)),
        func.sum(func.coalesce(Execution.cached_tokens, 0)),
        func.count(),
        func.sum(unpriced),
    ).where(col(Execution.started_at).is_not(None), col(column).is_not(None))
    groups = [None] if keys is None else list(chunks(sorted(set(keys))))
    found: dict[str, SpendView] = {}
    for chunk in groups:
        part = query if chunk is None else query.where(col(column).in_(chunk))
        found |= _spend_rows(session, part.group_by(column))
    if with_models and found:
        found = _with_models(session, column, found)
    return found


def spend_since(session: Session, since: float) -> SpendView:
    """Spend of the executions started at or after ``since`` (today's, for a header)."""
    found = _spend_rows(
        session,
        select_columns(
            func.min(1),
            func.sum(func.coalesce(Execution.cost_usd, 0.0)),
            func.max(case((col(Execution.cost_estimated), 1), else_=0)),
            func.sum(func.coalesce(Execution.input_tokens, 0)),
            func.sum(func.coalesce(Execution.output_tokens, 0)),
            func.sum(func.coalesce(Execution.cached_tokens, 0)),
            func.count(),
            func.sum(case((col(Execution.cost_usd).is_(None), 1), else_=0)),
        ).where(col(Execution.started_at) >= since),
    )
    return next(iter(found.values()), NO_SPEND)


def _spend_rows(session: Session, query: ColumnsSelect) -> dict[str, SpendView]:
    return {
        key: SpendView(
            float(cost or 0), bool(estimated), int(inp or 0), int(out or 0), int(cached or 0),
            int(runs), int(unpriced or 0),
        )
        for key, cost, estimated, inp, out, cached, runs, unpriced in session.exec(query)
    }  # fmt: skip


def _with_models(
    session: Session, column: Any, spend: dict[str, SpendView]
) -> dict[str, SpendView]:
    models: dict[str, set[str]] = {}
    for chunk in chunks(sorted(spend)):
        query = (
            select(column, Execution.model)
            .where(col(column).in_(chunk), col(Execution.model).is_not(None))
            .where(col(Execution.started_at).is_not(None))
            .distinct()
        )
        for key, model in session.exec(query):
            if model is not None:  # the query's own condition: mypy cannot see it
                models.setdefault(key, set()).add(model)
    return {
        key: _replace_models(view, tuple(sorted(models.get(key, ()))))
        for key, view in spend.items()
    }


def _replace_models(view: SpendView, models: tuple[str, ...]) -> SpendView:
    return SpendView(
        view.cost_usd, view.estimated, view.input_tokens, view.output_tokens,
        view.cached_tokens, view.executions, view.unpriced, models,
    )  # fmt: skip
