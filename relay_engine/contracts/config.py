"""``relay.toml``: the engine settings and the agents it may dispatch to.

Validated with pydantic so that a typo fails with the file, the field and the reason,
and a running engine can keep its last good configuration when an edit is invalid.

Pure except :func:`load_config`, which reads the workspace's ``relay.toml``.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from relay_engine.contracts.accounts import account_key, cli_of, split_key
from relay_engine.contracts.inputs import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TASK_INPUT_BYTES,
    InputTooLarge,
    check_toml_shape,
    read_capped,
)
from relay_engine.contracts.numbers import COUNT_MAX
from relay_engine.contracts.pricing import Price, merged_prices
from relay_engine.contracts.rules import parse_rule

CONFIG_FILE = "relay.toml"
PROVIDERS = ("claude", "codex", "gemini", "opencode", "qwen", "copilot", "acp", "command", "sim")
Provider = Literal[
    "claude", "codex", "gemini", "opencode", "qwen", "copilot", "acp", "command", "sim"
]
KNOWN_ROLES = ("planner", "implementer", "reviewer", "assessor", "tester", "troubleshooter")


def is_provider(name: str) -> TypeGuard[Provider]:
    """A provider relay knows (an account key's first part may name any)."""
    return name in PROVIDERS


class ConfigError(ValueError):
    """relay.toml could not be used; the message names the file and every bad field."""


def _names_executable(argv: tuple[str, ...]) -> tuple[str, ...]:
    if not argv or not argv[0]:
        raise ValueError("command must name an executable")
    return argv


Argv = Annotated[tuple[str, ...], AfterValidator(_names_executable)]
Sandbox = Literal["bwrap", "none"]
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
RW_SUFFIX, RO_SUFFIX = ":rw", ":ro"


def split_sandbox_path(entry: str) -> tuple[str, bool]:
    """``"~/data:rw"`` -> (``"~/data"``, writable): a ``sandbox_paths`` entry, suffix removed."""
    if entry.endswith(RW_SUFFIX):
        return entry[: -len(RW_SUFFIX)], True
    return entry.removesuffix(RO_SUFFIX), False


def _sandbox_path(entry: str) -> str:
    path, _ = split_sandbox_path(entry)
    if not (path.startswith("/") or path.startswith("~/")) or "\0" in path:
        raise ValueError(
            f"{entry!r}: a sandbox path is absolute or starts with ~/ "
            '(add ":rw" to make it writable)'
        )
    return entry


def _env_pattern(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ValueError(f"{name!r}: an environment variable name, or a prefix ending in *")
    return name


SandboxPath = Annotated[str, AfterValidator(_sandbox_path)]
EnvPattern = Annotated[str, AfterValidator(_env_pattern)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NotificationConfig(_Strict):
    bell: bool = True
    toast: bool = True
    # what an operator who left relay alone must hear of: done, stuck, or asked something
    on: tuple[str, ...] = (
        "task.failed", "job.finished", "job.blocked", "gate.held", "agent.needs_input",
        "provider.recovered",
    )  # fmt: skip
    webhook: str | None = Field(default=None, pattern=r"^https?://\S+$")
    command: Argv | None = None


class EngineConfig(_Strict):
    max_concurrent_agents: int = Field(default=4, ge=1, le=512)
    lease_seconds: float = Field(default=90.0, gt=0)
    heartbeat_seconds: float = Field(default=15.0, gt=0)
    tick_seconds: float = Field(default=0.5, gt=0, le=60)
    # Hear other processes' submits and commands at once (PostgreSQL LISTEN/NOTIFY, or a
    # watched file beside a SQLite database), and tick only at heartbeats (and when a timed
    # wait ends) while the fleet only waits. Off behind a pooler that drops LISTEN
    # (pgbouncer in transaction mode).
    wake_ups: bool = True
    cancel_grace_seconds: float = Field(default=5.0, ge=0)
    default_budget_usd: float | None = Field(default=None, ge=0)  # for jobs without their own
    default_budget_tokens: int | None = Field(default=None, ge=0, le=COUNT_MAX)
    budget_warn_at: float = Field(default=0.8, gt=0, le=1)  # share of a budget that warns
    max_recoveries: int = Field(default=10, ge=1, le=10_000)
    # What an agent's stdout.txt and stderr.txt keep once it exits: its start and its end,
    # the middle cut with a line that says how much (an agent stuck printing fills disks).
    max_artifact_bytes: int = Field(default=16 << 20, ge=64 << 10)
    # Upgrade an older schema when the engine starts. Unset: on for SQLite (one workspace,
    # one relay), off for PostgreSQL, where an engine of the older release may still run.
    auto_migrate: bool | None = None
    # Every agent's sandbox unless it sets its own; unset: bwrap where it works (see README).
    sandbox: Sandbox | None = None

    @property
    def agent_deadline_seconds(self) -> float:
        """How long an agent's supervisor lets it run past the engine's last lease renewal:
        two heartbeats short of the lease, so a paused or cut-off engine's agent is gone
        (its grace included) before the lease expires and another engine may claim."""
        return self.lease_seconds - 2 * self.heartbeat_seconds

    @property
    def fence_grace_seconds(self) -> float:
        """TERM to KILL at the deadline: within one heartbeat of the two the deadline keeps."""
        return min(self.cancel_grace_seconds, self.heartbeat_seconds)

    @model_validator(mode="after")
    def _deadline_outlasts_heartbeats(self) -> EngineConfig:
        # Heartbeats come every heartbeat_seconds, on a full tick: the deadline must outlast
        # two of them, or a healthy engine's agents would be stopped between renewals.
        beat = max(self.heartbeat_seconds, self.tick_seconds)
        if self.agent_deadline_seconds < 2 * beat:
            raise ValueError(
                f"lease_seconds = {self.lease_seconds:g} is too short for heartbeat_seconds = "
                f"{self.heartbeat_seconds:g} (tick_seconds {self.tick_seconds:g}): an agent stops "
                "two heartbeats before its lease ends and must outlast two more, so "
                f"lease_seconds must be at least {2 * self.heartbeat_seconds + 2 * beat:g}"
            )
        return self


class InputsConfig(_Strict):
    """Size caps on what operators and planners hand relay, checked before anything runs."""

    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, ge=1024)  # job files, plans
    max_task_input_bytes: int = Field(default=DEFAULT_MAX_TASK_INPUT_BYTES, ge=1024)


class GitConfig(_Strict):
    """Where a finished job's branch goes: relay's own pull request, or GitHub's through ``gh``."""

    forge: Literal["local", "github"] = "local"
    remote: str | None = Field(default=None, min_length=1)
    push: bool = True  # push the job branch to ``remote`` as it moves
    auto_merge: bool = False  # merge approved jobs even when their file does not say so
    check_seconds: float = Field(default=15.0, gt=0)  # how often a forge is asked
    review_diff_chars: int = Field(default=60_000, ge=1000)
    gh: str = "gh"  # the gh executable (github forge)
    repo: str | None = Field(default=None, pattern=r"^[^/\s]+/[^/\s]+$")  # gh -R OWNER/REPO
    # The repository's checks, run before a job merges (each a command line, split like a
    # shell would but never run by one): set, every merge is prepared by a merge_prep task.
    merge_checks: tuple[str, ...] = ()

    @field_validator("merge_checks")
    @classmethod
    def _checks_split(cls, checks: tuple[str, ...]) -> tuple[str, ...]:
        for check in checks:
            try:
                if not shlex.split(check):
                    raise ValueError(f"merge check {check!r} is empty")
            except ValueError as error:
                raise ValueError(f"merge check {check!r}: {error}") from None
        return checks

    # What relay writes back on a job's pull request (core/writeback.py): none by default.
    publish: tuple[Literal["review", "plan", "assessment", "failure"], ...] = ()

    @model_validator(mode="after")
    def _github_needs_a_pushed_branch(self) -> GitConfig:
        if self.forge == "github" and (self.remote is None or not self.push):
            raise ValueError("forge = 'github' needs remote = '<name>' and push = true")
        return self


def _valid_rules(rules: tuple[str, ...]) -> tuple[str, ...]:
    for rule in rules:
        parse_rule(rule)
    return rules


Rules = Annotated[tuple[str, ...], AfterValidator(_valid_rules)]
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")


def _seconds(value: object) -> float:
    """A duration: seconds as a number, or "90s", "30m", "2h"."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if match is None:
            raise ValueError(f'{value!r} is not a duration: write seconds, or e.g. "30m"')
        seconds = float(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2] or "s"]
    if seconds <= 0:
        raise ValueError("a duration must be more than zero")
    return seconds


Duration = Annotated[float, BeforeValidator(_seconds)]


class PermissionsConfig(_Strict):
    """What agents may do without asking: ``[permissions]``, and an agent's ``permissions``,
    which can only narrow the workspace's (its denies add, its allows must both match)."""

    allow: Rules = ()
    deny: Rules = ()
    ask: Literal["operator", "deny"] = "operator"  # who answers what no rule decides
    ask_timeout: Duration = 30 * 60.0  # then the request is denied and the agent goes on


class AgentPermissions(_Strict):
    allow: Rules = ()
    deny: Rules = ()
    ask: Literal["operator", "deny"] | None = None


READ_ONLY_KINDS = frozenset({"plan", "assess"})


class AgentConfig(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9._-]+$", max_length=64)
    provider: Provider
    account: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+$", max_length=64)
    roles: tuple[str, ...] = ("implementer",)
    model_class: str | None = None
    model: str | None = None
    enabled: bool = True
    max_concurrent: int | None = Field(default=None, ge=1)  # on this engine
    cluster_max_concurrent: int | None = Field(default=None, ge=1)  # on every engine together
    env: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] = ()
    command: Argv | None = None
    access: Literal["read-only", "workspace-write", "full"] = "workspace-write"
    args: tuple[str, ...] = ()  # appended verbatim to the CLI's argv
    daily_budget_usd: float | None = Field(default=None, ge=0)
    permissions: AgentPermissions | None = None
    # Containment (README "Sandbox"): unset sandbox/network mean the provider's default.
    sandbox: Sandbox | None = None
    network: Literal["on", "off"] | None = None
    sandbox_paths: tuple[SandboxPath, ...] = ()  # visible read-only, or writable with ":rw"
    env_passthrough: tuple[EnvPattern, ...] = ()  # engine variables added to the default list

    @property
    def account_key(self) -> str:
        """What its login, limits and quota are kept under: ``claude`` or ``claude/work``
        (an ``acp`` agent's are its CLI's: ``["gemini", "--acp"]`` counts as gemini)."""
        return account_key(cli_of(self.provider, self.command), self.account)

    @field_validator("roles")
    @classmethod
    def _roles_not_empty(cls, roles: tuple[str, ...]) -> tuple[str, ...]:
        if not roles:
            raise ValueError("an agent needs at least one role")
        return roles

    @model_validator(mode="after")
    def _command_agent_has_command(self) -> AgentConfig:
        if self.provider == "command" and self.command is None:
            raise ValueError(
                'provider "command" needs command = ["executable", "{prompt}", …]: '
                "relay has nothing else to run"
            )
        if self.provider == "acp" and self.command is None:
            raise ValueError(
                'provider "acp" needs the agent\'s ACP command, e.g. command = ["gemini", "--acp"]'
            )
        return self

    @model_validator(mode="after")
    def _network_off_needs_the_sandbox(self) -> AgentConfig:
        if self.network == "off" and self.sandbox == "none":
            raise ValueError(
                'network = "off" needs the sandbox: without it nothing can take the '
                'network away (drop sandbox = "none" here or in [engine], or set network = "on")'
            )
        return self

    def for_kind(self, kind: str) -> AgentConfig:
        """The agent as it runs work of ``kind``: a planner or an assessor reads the code
        and changes nothing, so it runs read-only unless its ``access`` is set."""
        if kind in READ_ONLY_KINDS and "access" not in self.model_fields_set:
            return self.model_copy(update={"access": "read-only"})
        return self


class PriceConfig(_Strict):
    """USD per million tokens, for CLIs that report tokens but no cost."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached: float | None = Field(default=None, ge=0)


class AccountConfig(_Strict):
    """``[providers.X.accounts.NAME]``: one login's own budget and watermark."""

    daily_budget_usd: float | None = Field(default=None, ge=0)
    stop_at: float | None = Field(default=None, gt=0, le=1)


class ProviderConfig(_Strict):
    daily_budget_usd: float | None = Field(default=None, ge=0)  # every account together
    cluster_max_concurrent: int | None = Field(default=None, ge=1)  # the provider, fleet-wide
    stop_at: float = Field(default=0.95, gt=0, le=1)  # no new task above this share of a window
    accounts: dict[str, AccountConfig] = Field(default_factory=dict)


class ClusterConfig(_Strict):
    """What every engine on the database shares (each engine has its own slots)."""

    max_running: int | None = Field(default=None, ge=1)


class RelayConfig(_Strict):
    engine: EngineConfig = EngineConfig()
    cluster: ClusterConfig = ClusterConfig()
    notifications: NotificationConfig = NotificationConfig()
    git: GitConfig = GitConfig()
    inputs: InputsConfig = InputsConfig()
    permissions: PermissionsConfig = PermissionsConfig()
    agents: tuple[AgentConfig, ...] = Field(default=(), validate_default=True)
    keymap: dict[str, str] = Field(default_factory=dict)
    pricing: dict[str, PriceConfig] = Field(default_factory=dict)
    providers: dict[Provider, ProviderConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _engine_sandbox_reaches_agents(cls, data: object) -> object:
        """``[engine] sandbox`` is every agent's that sets none, so an agent's own field is
        the whole answer (and editing the engine's counts as editing the agents)."""
        if not isinstance(data, dict):
            return data
        engine = data.get("engine")
        default = engine.get("sandbox") if isinstance(engine, dict) else None
        default = default or getattr(engine, "sandbox", None)
        agents = data.get("agents")
        if default not in ("bwrap", "none") or not isinstance(agents, list | tuple):
            return data  # an invalid engine value is reported once, at engine.sandbox
        return {**data, "agents": [_with_sandbox(agent, default) for agent in agents]}

    @field_validator("agents")
    @classmethod
    def _unique_ids(cls, agents: tuple[AgentConfig, ...]) -> tuple[AgentConfig, ...]:
        """Ids name agents everywhere; and a workspace whose every task would wait for an
        agent that never comes is refused now, not found out task by task."""
        seen: set[str] = set()
        for agent in agents:
            if agent.id in seen:
                raise ValueError(f"duplicate agent id {agent.id!r}")
            seen.add(agent.id)
        if not any(agent.enabled for agent in agents):
            what = "every agent is disabled" if agents else "no [[agents]] are defined"
            raise ValueError(
                f"{what}, so no task could run: add an [[agents]] table (relay init writes "
                "an example) or set enabled = true"
            )
        return agents

    def warnings(self) -> list[str]:
        return agent_warnings(self.agents)

    def agent(self, agent_id: str) -> AgentConfig | None:
        return next((a for a in self.agents if a.id == agent_id), None)

    def stop_at(self, key: str) -> float:
        """The watermark of an account key: its own, else its provider's, else 0.95."""
        provider, account = split_key(key)
        settings = self.providers.get(provider) if is_provider(provider) else None
        if settings is None:
            return ProviderConfig().stop_at
        own = settings.accounts.get(account) if account else None
        return own.stop_at if own is not None and own.stop_at is not None else settings.stop_at

    @property
    def prices(self) -> dict[str, Price]:
        """The shipped price table with this file's ``[pricing]`` entries on top."""
        overrides = {
            model: Price(p.input, p.output, p.input if p.cached is None else p.cached)
            for model, p in self.pricing.items()
        }
        return merged_prices(overrides)

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(role for agent in self.agents for role in agent.roles) | set(KNOWN_ROLES)


def _with_sandbox(agent: object, default: str) -> object:
    if isinstance(agent, dict):
        return agent if "sandbox" in agent else {**agent, "sandbox": default}
    if isinstance(agent, AgentConfig) and agent.sandbox is None:
        return AgentConfig.model_validate({**agent.model_dump(), "sandbox": default})
    return agent


def agent_warnings(agents: Iterable[AgentConfig]) -> list[str]:
    """Settings that are valid but will not do what they say."""
    found = []
    for agent in agents:
        if agent.provider in ("codex", "opencode") and agent.tools:
            found.append(
                f"agent {agent.id}: {agent.provider} has no tool allow-list flag; `tools` is "
                f'ignored (use access = "read-only" to stop it writing)'
            )
        if agent.provider == "gemini" and agent.access == "workspace-write":
            found.append(
                f"agent {agent.id}: gemini's auto_edit (access = workspace-write) offers no "
                f'shell tool at all, so it cannot run a command; use provider = "acp" with '
                f'command = ["gemini", "--acp"] (it asks relay) or access = "full"'
            )
        if agent.sandbox == "none" and agent.sandbox_paths:
            found.append(
                f'agent {agent.id}: sandbox = "none": `sandbox_paths` is ignored '
                "(without the sandbox every path is visible and writable)"
            )
    return found


def _field_path(loc: Iterable[int | str], data: dict[str, Any]) -> str:
    parts: list[str] = []
    node: object = data
    for item in loc:
        if isinstance(item, int):
            label = f"[{item}]"
            if isinstance(node, list) and item < len(node) and isinstance(node[item], dict):
                ident = node[item].get("id")
                label += f" ({ident})" if ident else ""
            parts.append(label)
            node = node[item] if isinstance(node, list) and item < len(node) else None
        else:
            parts.append(("." if parts else "") + item)
            node = node.get(item) if isinstance(node, dict) else None
    return "".join(parts) or "(top level)"


def parse_config(text: str, source: Path) -> RelayConfig:
    try:
        check_toml_shape(text, max_bytes=DEFAULT_MAX_FILE_BYTES)
        data = tomllib.loads(text)
    except InputTooLarge as error:
        raise ConfigError(f"{source}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: invalid TOML: {error}") from error
    try:
        return RelayConfig.model_validate(data)
    except ValidationError as error:
        lines = [
            f"{source}: {_field_path(problem['loc'], data)}: "
            f"{problem['msg'].removeprefix('Value error, ')}"
            for problem in error.errors()
        ]
        raise ConfigError("\n".join(lines)) from error


def load_config(workspace: Path) -> RelayConfig:
    """The workspace's config, or a default with one sim agent when there is none."""
    path = workspace / CONFIG_FILE
    if not path.exists():
        return default_config()
    try:
        text = read_capped(path, DEFAULT_MAX_FILE_BYTES)
    except InputTooLarge as error:
        raise ConfigError(f"{path}: {error}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    return parse_config(text, path)


def default_config() -> RelayConfig:
    return RelayConfig(agents=(AgentConfig(id="sim", provider="sim", roles=KNOWN_ROLES),))
