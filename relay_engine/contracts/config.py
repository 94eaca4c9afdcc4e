"""``relay.toml``: the engine settings and the agents it may dispatch to.

Validated with pydantic so that a typo fails with the file, the field and the reason,
and a running engine can keep its last good configuration when an edit is invalid.

Pure except :func:`load_config`, which reads the workspace's ``relay.toml``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from relay_engine.contracts.inputs import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TASK_INPUT_BYTES,
    InputTooLarge,
    check_toml_shape,
    read_capped,
)
from relay_engine.contracts.pricing import Price, merged_prices

CONFIG_FILE = "relay.toml"
PROVIDERS = ("claude", "codex", "gemini", "command", "sim")
KNOWN_ROLES = ("planner", "implementer", "reviewer", "assessor", "tester", "troubleshooter")


class ConfigError(ValueError):
    """relay.toml could not be used; the message names the file and every bad field."""


def _names_executable(argv: tuple[str, ...]) -> tuple[str, ...]:
    if not argv or not argv[0]:
        raise ValueError("command must name an executable")
    return argv


Argv = Annotated[tuple[str, ...], AfterValidator(_names_executable)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NotificationConfig(_Strict):
    bell: bool = True
    toast: bool = True
    on: tuple[str, ...] = ("task.failed", "job.finished", "provider.recovered")
    webhook: str | None = Field(default=None, pattern=r"^https?://\S+$")
    command: Argv | None = None


class EngineConfig(_Strict):
    max_concurrent_agents: int = Field(default=4, ge=1, le=512)
    lease_seconds: float = Field(default=90.0, gt=0)
    heartbeat_seconds: float = Field(default=15.0, gt=0)
    tick_seconds: float = Field(default=0.5, gt=0, le=60)
    cancel_grace_seconds: float = Field(default=5.0, ge=0)
    default_budget_usd: float | None = Field(default=None, ge=0)  # for jobs without their own
    default_budget_tokens: int | None = Field(default=None, ge=0)
    budget_warn_at: float = Field(default=0.8, gt=0, le=1)  # share of a budget that warns
    max_recoveries: int = Field(default=10, ge=1, le=10_000)
    # Upgrade an older schema when the engine starts. Unset: on for SQLite (one workspace,
    # one relay), off for PostgreSQL, where an engine of the older release may still run.
    auto_migrate: bool | None = None


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

    @model_validator(mode="after")
    def _github_needs_a_pushed_branch(self) -> GitConfig:
        if self.forge == "github" and (self.remote is None or not self.push):
            raise ValueError("forge = 'github' needs remote = '<name>' and push = true")
        return self


class AgentConfig(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9._-]+$", max_length=64)
    provider: Literal["claude", "codex", "gemini", "command", "sim"]
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
        return self


class PriceConfig(_Strict):
    """USD per million tokens, for CLIs that report tokens but no cost."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached: float | None = Field(default=None, ge=0)


class ProviderConfig(_Strict):
    daily_budget_usd: float | None = Field(default=None, ge=0)
    cluster_max_concurrent: int | None = Field(default=None, ge=1)  # the account, fleet-wide


class ClusterConfig(_Strict):
    """What every engine on the database shares (each engine has its own slots)."""

    max_running: int | None = Field(default=None, ge=1)


class RelayConfig(_Strict):
    engine: EngineConfig = EngineConfig()
    cluster: ClusterConfig = ClusterConfig()
    notifications: NotificationConfig = NotificationConfig()
    git: GitConfig = GitConfig()
    inputs: InputsConfig = InputsConfig()
    agents: tuple[AgentConfig, ...] = ()
    keymap: dict[str, str] = Field(default_factory=dict)
    pricing: dict[str, PriceConfig] = Field(default_factory=dict)
    providers: dict[Literal["claude", "codex", "gemini", "command", "sim"], ProviderConfig] = Field(
        default_factory=dict
    )

    @field_validator("agents")
    @classmethod
    def _unique_ids(cls, agents: tuple[AgentConfig, ...]) -> tuple[AgentConfig, ...]:
        seen: set[str] = set()
        for agent in agents:
            if agent.id in seen:
                raise ValueError(f"duplicate agent id {agent.id!r}")
            seen.add(agent.id)
        return agents

    def warnings(self) -> list[str]:
        return agent_warnings(self.agents)

    def agent(self, agent_id: str) -> AgentConfig | None:
        return next((a for a in self.agents if a.id == agent_id), None)

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


def agent_warnings(agents: Iterable[AgentConfig]) -> list[str]:
    """Settings that are valid but will not do what they say."""
    return [
        f"agent {agent.id}: codex has no tool allow-list flag; `tools` is ignored "
        f'(use access = "read-only" to stop it writing)'
        for agent in agents
        if agent.provider == "codex" and agent.tools
    ]


def _field_path(loc: Iterable[int | str], data: dict) -> str:
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
