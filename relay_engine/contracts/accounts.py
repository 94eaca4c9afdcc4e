"""Provider accounts: several logins of one provider on one host.

An agent with ``account = "work"`` runs its CLI with a config directory of its own
(``.relay/accounts/<provider>/work``), so two subscriptions of one provider can work side by
side. Everything that belongs to a login -- usage limits, quota windows, daily budgets,
"not logged in" -- is kept per *account key*: ``"claude"`` for an agent that names no
account (what relay always did, so existing databases and configs keep their meaning) and
``"claude/work"`` for a named one.

Pure: names and paths only, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePath

ACCOUNTS_DIR = ("accounts",)  # under the workspace's .relay folder

ACCOUNT_ENV: dict[str, tuple[tuple[str, str], ...]] = {
    "claude": (("CLAUDE_CONFIG_DIR", ""),),
    "codex": (("CODEX_HOME", ""),),
    "gemini": (("GEMINI_CLI_HOME", ""),),  # gemini keeps its state in $GEMINI_CLI_HOME/.gemini
    "qwen": (("QWEN_HOME", ""),),
    "copilot": (("COPILOT_HOME", ""),),
    # opencode keeps logins (auth.json) and sessions under $XDG_DATA_HOME/opencode; its own
    # config directory is an extra one it reads after ~/.config/opencode.
    "opencode": (("XDG_DATA_HOME", "data"), ("OPENCODE_CONFIG_DIR", "config")),
}
"""Each CLI's variables that move its login and state (from its --help or its own docs),
and the folder under the account directory each one points at."""


def account_key(provider: str, account: str | None) -> str:
    """``claude`` for the default account, ``claude/work`` for a named one."""
    return f"{provider}/{account}" if account else provider


def split_key(key: str) -> tuple[str, str]:
    """(provider, account) of an account key; the default account is ``""``."""
    provider, _, account = key.partition("/")
    return provider, account


def cli_of(provider: str, command: tuple[str, ...] | None) -> str:
    """Which CLI an agent really runs: its provider, or for ``acp`` the command's program
    (``["gemini", "--acp"]`` is gemini's login)."""
    if provider == "acp" and command:
        return PurePath(command[0]).name
    return provider


def account_dir(relay_dir: Path, provider: str, account: str) -> Path:
    return relay_dir.joinpath(*ACCOUNTS_DIR, provider, account)


def account_env(cli: str, directory: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The variables that point ``cli`` at ``directory``, except those ``env`` (the agent's
    own) already sets: an operator who names the folder keeps it."""
    return {
        name: str(directory / sub if sub else directory)
        for name, sub in ACCOUNT_ENV.get(cli, ())
        if name not in env
    }
