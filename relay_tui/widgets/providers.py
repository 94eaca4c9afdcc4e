"""The Providers table: each provider (ok or limited, its reset and countdown, work parked on
it) and under it each of its agents with whether it can work and the fix when it cannot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.text import Text

from relay_engine.core.states import TaskState
from relay_engine.store.read_model import AgentRow
from relay_tui.data.snapshot import Snapshot
from relay_tui.render.limits import limit_words, reset_words
from relay_tui.render.styles import clock_time, duration, styled
from relay_tui.widgets.live_table import LiveTable, Row

AGENT_ROW = "agent:"
AGENT_OK = frozenset({"ready"})
AGENT_WAITING = frozenset({"limited", "unreachable", "budget"})


def agent_style(status: str, styles: Mapping[str, str]) -> str:
    """Ready green; waits that end on their own yellow; what needs the operator red."""
    if status in AGENT_OK:
        return styles.get("ok", "")
    if status in AGENT_WAITING:
        return styles.get("limited", "")
    return styles.get("FAILED", "")


class ProvidersTable(LiveTable):
    """One row per provider, and under it one row per agent with its availability."""

    COLUMNS = (
        ("provider", "Provider/agent", 14),
        ("status", "Status", 14),
        ("reset", "Resets", 6),
        ("in", "In", 5),
        ("parked", "Wait", 4),
        ("running", "Run", 3),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"provider": 1, "status": 3}
    OPTIONAL: ClassVar[Mapping[str, int]] = {"reset": 64, "parked": 54}

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        agents: dict[str, list[AgentRow]] = {}
        for agent in snapshot.agent_rows:
            agents.setdefault(agent.provider, []).append(agent)
        for provider in snapshot.providers:
            limited = provider.status == "limited"
            countdown = duration(provider.reset_at - now) if limited and provider.reset_at else ""
            status = f"{'‖' if limited else '●'} {provider.status}"
            rows.append(
                (
                    provider.provider,
                    (
                        Text(provider.provider, style="bold", end=""),
                        styled(status, provider.status, styles),
                        clock_time(provider.reset_at)[:5] if limited else "",
                        countdown,
                        str(provider.parked),
                        str(provider.running),
                    ),
                )
            )
            rows += [agent_row(a, snapshot, now, styles) for a in agents.pop(provider.provider, [])]
        for rest in agents.values():  # agents of a provider nobody has used yet
            rows += [agent_row(a, snapshot, now, styles) for a in rest]
        return rows

    now = 0.0

    def apply(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        self.now = now
        self.sync(self.build_rows(snapshot, now, styles), keep_order=True)

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        now = self.now
        if key is not None and key.startswith(AGENT_ROW):
            agent = snapshot.agent_row(key.removeprefix(AGENT_ROW))
            return agent_preview(agent, now) if agent else ""
        provider = snapshot.provider(key)
        if provider is None:
            return ""
        if provider.status == "limited":
            reset = f" — {reset_words(provider.reset_at, now)}" if provider.reset_at else ""
            return (
                f"{provider.provider}: {limit_words(provider.source_text, now) or 'limited'}{reset}"
            )
        return f"{provider.provider}: ok"


def agent_row(agent: AgentRow, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> Row:
    waiting = (
        sum(
            1
            for t in snapshot.tasks.values()
            if t.state == TaskState.PARKED and t.waiting_on_provider == agent.id
        )
        if agent.status not in AGENT_OK
        else 0
    )
    running = sum(1 for run in snapshot.runs if run.agent == agent.id)
    name = agent.id + ("" if agent.enabled else " (disabled)")
    until = agent.until if agent.status != "ready" else None
    return (
        f"{AGENT_ROW}{agent.id}",
        (
            Text.assemble(("└ ", "dim"), name, end=""),
            Text(agent.summary, style=agent_style(agent.status, styles), end=""),
            clock_time(until)[:5] if until else "",
            duration(until - now) if until and until > now else "",
            str(waiting) if waiting else "",
            str(running),
        ),
    )


def agent_preview(agent: AgentRow, now: float | None = None) -> str:
    """The fix first: it is what the operator came to this row for."""
    if agent.status == "ready":
        return f"{agent.id} ({agent.provider}): ready"
    fix = f"fix: {agent.fix}" if agent.fix else "no fix needed"
    reason = f" — {limit_words(agent.reason, now)}" if agent.reason else ""
    return f"{agent.id}: {fix}{reason}"
