"""``relay agents``, ``relay agents reset ID`` and ``relay doctor``: is each agent able to work?"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table
from sqlalchemy.engine import make_url

from relay_engine.agents import native
from relay_engine.agents.doctor import DoctorRow, diagnose, offline_login
from relay_engine.agents.launch import account_vars
from relay_engine.agents.sandbox import HostSandbox, probe
from relay_engine.cli.inbox import command
from relay_engine.cli.output import console, err, open_store, table_or_records
from relay_engine.contracts.accounts import cli_of
from relay_engine.contracts.config import AgentConfig, RelayConfig, load_config
from relay_engine.contracts.time_format import limit_words
from relay_engine.ops.commands import ResetAgent
from relay_engine.store.db import Store, database_url
from relay_engine.store.read_model.agents import AgentRow, agent_rows
from relay_engine.store.wakes import PROBE_S, WakeChannel, wake_ups_come_back

STATUS_STYLES = {"ready": "green", "unreachable": "yellow", "limited": "yellow", "quota": "yellow"}


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    if name == "doctor":
        parser.set_defaults(func=cmd_doctor)
        return
    parser.set_defaults(func=lambda a: cmd_agents(a, open_store(a)))
    agent_sub = parser.add_subparsers(dest="agents_command")
    reset = agent_sub.add_parser("reset", help="clear an agent's unavailable state now")
    reset.add_argument("agent")
    reset.set_defaults(func=command(lambda a: ResetAgent(agent=a.agent)))


def cmd_agents(args: argparse.Namespace, store: Store) -> int:
    workspace = Path(args.workspace).resolve()
    config = load_config(workspace)
    with store.read() as session:
        now = time.time()
        rows = agent_rows(session, now, config.agents, config=config)
    logins = {row.id: _login(config.agent(row.id), row.status, workspace) for row in rows}
    if args.json:
        print(json.dumps([{**row.as_dict(), "login": logins[row.id]} for row in rows], indent=2))
        return 0
    console.print(_agents_table(rows, logins, now))
    return 0


def _agents_table(rows: list[AgentRow], logins: dict[str, str], now: float) -> RenderableType:
    table = Table(title="agents", title_justify="left")
    for column in ("agent", "provider", "account", "login", "status", "reason", "fix"):
        # An agent's id whole, as its one key; the rest fold to fit (a long path, too).
        table.add_column(column, no_wrap=column == "agent", overflow="fold")
    records = []
    for row in rows:
        style = STATUS_STYLES.get(row.status, "red")
        status = f"[{style}]{escape(row.summary if row.enabled else 'disabled')}[/]"
        reason, fix = escape(limit_words(row.reason, now)), escape(row.fix or "")
        account = row.account or "(default)"
        table.add_row(row.id, row.provider, account, logins[row.id], status, reason, fix)
        fields = [("account", account), ("login", logins[row.id])]
        fields += [(label, text) for label, text in (("reason", reason), ("fix", fix)) if text]
        records.append((f"[bold]{row.id}[/] ({row.provider}): {status}", fields))
    return table_or_records(table, records, wide=120)


def _login(agent: AgentConfig | None, status: str, workspace: Path) -> str:
    """What relay knows of the agent's login without running its CLI (``relay doctor``
    asks the CLI itself): its last run's verdict, else its keys and credential files."""
    if status == "auth":
        return "not logged in"
    if agent is None or agent.provider in ("command", "sim"):
        return "-"
    env = {**os.environ, **agent.env, **account_vars(workspace, agent)}
    logged, detail = offline_login(cli_of(agent.provider, agent.command), env)
    label = {True: "logged in", False: "not logged in", None: "unknown"}[logged]
    return f"{label} {detail}".strip()


def cmd_doctor(args: argparse.Namespace) -> int:
    """A table of every agent; exit 1 when an enabled agent cannot run."""
    config = load_config(Path(args.workspace).resolve())
    host = probe(os.environ.get("PATH"))
    rows = diagnose(config.agents, os.environ, Path(args.workspace).resolve(), host)
    broken = [row.agent for row in rows if row.enabled and not row.ok]
    heard, wake_ups = _wake_ups(database_url(Path(args.workspace).resolve(), args.db), config)
    warnings = config.warnings() + _sandbox_warnings(host)
    warnings += [warning for row in rows for warning in row.warnings]
    warnings += [f"wake-ups: {wake_ups}"] if heard is False else []
    if args.json:
        dumped = [{**asdict(row), "ok": row.ok} for row in rows]
        sandbox = {"works": host.problem is None, "bwrap": host.bwrap, "problem": host.problem}
        report = {"agents": dumped, "sandbox": sandbox, "supervisor": native.describe()}
        report["wake_ups"] = {"heard": heard, "detail": wake_ups}
        print(json.dumps({**report, "warnings": warnings}, indent=2))
        return 1 if broken else 0
    console.print(_doctor_table(rows))  # or one block per agent, in a narrow terminal
    if host.problem is None:
        console.print(f"sandbox: {escape(host.detail)}")
    console.print(f"supervisor: {native.describe()}", markup=False, highlight=False)
    if heard is not False:  # else it is a warning below
        console.print(f"wake-ups: {wake_ups}", markup=False, highlight=False)
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    if broken:
        err.print(f"[red]cannot run:[/] {', '.join(broken)}")
        return 1
    console.print("every enabled agent can run")
    return 0


DOCTOR_FACTS = ("executable", "version", "access flags", "login", "sandbox", "network")


def _doctor_table(rows: list[DoctorRow]) -> RenderableType:
    table = Table(title="relay doctor", title_justify="left")
    for column in ("agent", "provider", "account", *DOCTOR_FACTS, "problem", "fix"):
        table.add_column(column, overflow="fold")
    records = []
    for row in rows:
        verdict = escape("; ".join(row.problems)) if row.problems else "[green]ok[/]"
        if not row.enabled:
            verdict = f"(disabled) {verdict}"
        facts = (row.executable, row.version, row.argv, row.login, row.sandbox, row.network)
        shown = [escape(fact) for fact in facts]  # a CLI's own words, brackets and all
        account = row.account or "(default)"
        table.add_row(row.agent, row.provider, account, *shown, verdict, escape(row.fix))
        fields = [("account", account), *zip(DOCTOR_FACTS, shown, strict=True)]
        fields += [("fix", escape(row.fix))] if row.fix else []
        records.append((f"[bold]{row.agent}[/] ({row.provider}): {verdict}", fields))
    return table_or_records(table, records, wide=160)


def _wake_ups(url: str, config: RelayConfig) -> tuple[bool | None, str]:
    """Whether engines on this database will hear each other's callers at once (None: not
    asked of a server), in words. On PostgreSQL it is asked as an engine asks: a probe of
    its own, sent and listened for, which a pooler in transaction mode never delivers."""
    if not config.engine.wake_ups:
        return (
            None,
            f"off ([engine] wake_ups = false): engines tick every {config.engine.tick_seconds:g} s",
        )
    if not url.startswith("postgresql"):
        return None, "a file beside the SQLite database, watched by each engine"
    import psycopg  # only with the postgres extra

    shown = make_url(url).render_as_string(hide_password=True)
    try:
        heard = wake_ups_come_back(WakeChannel.of(url, None).conninfo or url)
    except psycopg.Error as error:
        return None, f"not checked: {shown}: {str(error).strip().splitlines()[0]}"
    if heard:
        return True, f"heard: LISTEN/NOTIFY reach engines on {shown}"
    return False, (
        f"a probe sent on {shown} did not come back within {PROBE_S:g} s (a pooler in "
        "transaction mode?): engines will tick every tick_seconds; set [engine] wake_ups = false"
    )


def _sandbox_warnings(host: HostSandbox) -> list[str]:
    if host.problem is None:
        return []
    return [
        f"no sandbox: {host.problem}; agents that do not ask for one run without it, "
        "able to write wherever relay can"
    ]
