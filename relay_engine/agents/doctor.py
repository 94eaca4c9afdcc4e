"""``relay doctor``: can each configured agent run, before a task finds out the hard way?

For every agent: its executable and version, whether that version's ``--help`` knows every
flag (and flag value) relay will pass, the login state where the CLI can tell offline,
and the access flags relay passes (which supervisor the host's agents run under is
:func:`relay_engine.agents.native.describe`). The judging is pure (:func:`argv_problems`, :func:`judge`);
:func:`check_agent` runs the CLI's own read-only subcommands to gather facts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from relay_engine.agents.adapters.base import InvocationContext
from relay_engine.agents.launch import account_vars, adapter_for, executable_of
from relay_engine.agents.sandbox import HostSandbox, probe
from relay_engine.contracts.accounts import cli_of
from relay_engine.contracts.config import AgentConfig
from relay_engine.core.failures import login_fix, missing_fix
from relay_engine.core.sandbox import SandboxChoice, choose_sandbox

PROBE_TIMEOUT_S = 30.0
CHOICE_FLAGS = (
    "--sandbox", "--permission-mode", "--approval-mode", "--output-format", "--input-format",
    "--format", "--log-level",
)  # fmt: skip
SAMPLE_RULES = (("Bash(npm test:*)",), ("Bash(rm:*)",))  # so the rule flags are checked too
HIDES_FLAGS = frozenset({"claude"})
"""CLIs whose --help leaves out flags relay relies on (claude's --permission-prompt-tool):
for these a missing flag is tried before it is called unknown."""
HELP_ARGS = {
    "claude": ("--help",),
    "codex": ("exec", "--help"),
    "gemini": ("--help",),
    "qwen": ("--help",),
    "copilot": ("--help",),
    "opencode": ("run", "--help"),
}
"""Where each CLI lists the flags relay passes (an ``acp`` agent: its own CLI's ``--help``)."""
COPILOT_TOKENS = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_BASE_URL")
GEMINI_KEYS = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_GCA",
)


@dataclass(frozen=True)
class Facts:
    """What running the agent's CLI told us (None: could not tell)."""

    executable: str
    found: bool
    version: str | None = None
    help_text: str | None = None
    logged_in: bool | None = None
    login_detail: str = ""
    accepted: frozenset[str] = frozenset()  # flags --help hides that the CLI still takes
    account_env: tuple[tuple[str, str], ...] = ()  # where a named account's login lives


@dataclass(frozen=True)
class DoctorRow:
    agent: str
    provider: str
    enabled: bool
    account: str  # "" for the provider's default login
    executable: str
    version: str
    argv: str  # the access flags relay passes
    login: str
    problems: tuple[str, ...]
    fix: str
    sandbox: str = "none"  # what the agent would run in here, and why when not bwrap
    network: str = "on"
    warnings: tuple[str, ...] = ()  # it runs, but not quite as configured

    @property
    def ok(self) -> bool:
        return not self.problems


def sample_argv(agent: AgentConfig) -> list[str]:
    """The argv relay would build for this agent (a fresh run, placeholder prompt)."""
    context = InvocationContext(
        prompt="relay doctor",
        prompt_file=Path("prompt.md"),
        result_file=Path("result.json"),
        cwd=Path("."),
        model=agent.model,
        tools=agent.tools,
        command=agent.command if agent.provider != "command" else None,
        extra_args=agent.args,
        access=agent.access,
        permission_channel=True,
        allow_rules=SAMPLE_RULES[0],
        deny_rules=SAMPLE_RULES[1],
    )
    return adapter_for(agent).build(context).argv


def _wrapper_length(agent: AgentConfig) -> int:
    """How much of the argv is the agent's own ``command`` (an ``acp`` agent's ACP flag is
    its CLI's, so only the program is the wrapper)."""
    if agent.provider == "acp":
        return 1
    return len(agent.command or (agent.provider,))


def account_login_fix(agent: AgentConfig, account_env: tuple[tuple[str, str], ...]) -> str:
    """How to log in: for a named account, with its config directory set."""
    fix = login_fix(cli_of(agent.provider, agent.command))
    if not agent.account or not account_env:
        return fix
    where = " ".join(f"{name}={value}" for name, value in account_env)
    return f"for account {agent.account}, with {where}: {fix}"


def argv_problems(
    argv: list[str], help_text: str, accepted: frozenset[str] = frozenset()
) -> list[str]:
    """Flags (and choice values) in ``argv`` that ``help_text`` does not mention, unless
    the CLI took them when tried (``accepted``: claude's hidden --permission-prompt-tool)."""
    problems = []
    for index, token in enumerate(argv):
        if not token.startswith("-") or token == "-":
            continue
        flag = token.split("=", 1)[0]
        if flag in accepted:
            continue
        if not _mentions(help_text, flag):
            problems.append(f"{flag} is not in this version's --help")
        elif flag in CHOICE_FLAGS and index + 1 < len(argv):
            value = argv[index + 1]
            if not _mentions(help_text, value):
                problems.append(f"{flag} {value} is not a choice this version offers")
    return problems


def _mentions(help_text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", help_text) is not None


def hidden_flags(argv: list[str], help_text: str) -> list[tuple[str, str | None]]:
    """Flags of ``argv`` (with the value after them) that ``help_text`` does not list."""
    found = []
    for index, token in enumerate(argv):
        if token.startswith("--") and not _mentions(help_text, token.split("=", 1)[0]):
            value = argv[index + 1] if index + 1 < len(argv) else None
            found.append((token, value if value and not value.startswith("-") else None))
    return found


def access_flags(agent: AgentConfig, argv: list[str]) -> str:
    """The part of the argv that grants write access and workspace trust."""
    if agent.provider == "acp":
        return f"ACP session mode for access = {agent.access} (relay's rules answer its asks)"
    wanted = ("--sandbox", "--skip-git-repo-check", "--permission-mode", "--approval-mode",
              "--agent", "--auto", "--allow-all-tools", "--allow-all", "--skip-trust")  # fmt: skip
    shown: list[str] = []
    for index, token in enumerate(argv):
        if token in wanted or token == "--deny-tool=write":
            shown.append(token)
            if token in (*CHOICE_FLAGS, "--agent") and index + 1 < len(argv):
                shown.append(argv[index + 1])
    return " ".join(shown) or f"access = {agent.access}"


def sandbox_of(agent: AgentConfig, host_problem: str | None) -> SandboxChoice:
    """The sandbox and network this agent would get on a host with ``host_problem``."""
    adapter = adapter_for(agent)
    return choose_sandbox(
        agent.sandbox,
        agent.network,
        sandboxed_by_default=adapter.sandboxed_by_default,
        needs_network=adapter.needs_network,
        host_problem=host_problem,
    )


def judge(
    agent: AgentConfig, facts: Facts, is_root: bool, host_problem: str | None = None
) -> DoctorRow:
    """One agent's verdict from the facts gathered about its CLI and the host's sandbox."""
    argv = sample_argv(agent)
    problems: list[str] = []
    fix = ""
    choice = sandbox_of(agent, host_problem)
    if choice.problem:
        problems.append(choice.problem)
        fix = 'install bubblewrap (apt-get install bubblewrap), or set sandbox = "none"'

    if not facts.found:
        problems.append(f"{facts.executable} not found")
        fix = missing_fix(agent.provider, facts.executable)
    elif facts.help_text is not None:
        own = argv[_wrapper_length(agent) :]  # the CLI's flags, not the wrapper's
        problems += argv_problems(own, facts.help_text, facts.accepted)
        fix = (
            "fix `args`/`access`, or install the CLI version in the README's table"
            if problems
            else ""
        )
    if facts.logged_in is False:
        problems.append("not logged in")
        fix = fix or account_login_fix(agent, facts.account_env)
    if is_root and agent.provider == "claude" and agent.access == "full":
        problems.append('claude refuses access = "full" (bypassPermissions) as root')
        fix = fix or 'use access = "workspace-write", or run relay as a normal user'
    login = {True: "logged in", False: "not logged in", None: "unknown"}[facts.logged_in]
    return DoctorRow(
        agent=agent.id,
        provider=agent.provider,
        enabled=agent.enabled,
        account=agent.account or "",
        executable=facts.executable,
        version=facts.version or ("-" if facts.found else "missing"),
        argv=access_flags(agent, argv),
        login=f"{login} {facts.login_detail}".strip(),
        problems=tuple(problems),
        fix=fix,
        sandbox=choice.kind if choice.kind == "bwrap" else f"none ({choice.why})",
        network=choice.network,
        warnings=tuple(_nesting_warnings(agent, choice, is_root)),
    )


def _nesting_warnings(agent: AgentConfig, choice: SandboxChoice, is_root: bool) -> list[str]:
    """codex sandboxes its commands with bubblewrap of its own, which cannot start inside
    relay's as root (bwrap as uid 0 without capabilities cannot make namespaces)."""
    if agent.provider != "codex" or choice.kind != "bwrap" or agent.access == "full":
        return []
    if not is_root:
        return []
    return [
        f"agent {agent.id}: as root, codex's own command sandbox cannot start inside relay's; "
        'set access = "full" (relay\'s sandbox still confines it) or sandbox = "none"'
    ]


# --- gathering facts (runs the CLI's read-only subcommands) -----------------------------------


def _run(argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str] | None:
    try:
        done = subprocess.run(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stdout, done.stderr


def check_agent(
    agent: AgentConfig, base_env: Mapping[str, str], workspace: Path | None = None
) -> Facts:
    """Facts about the agent's CLI, run with the agent's env and its account's folders."""
    account = account_vars(workspace, agent) if workspace is not None else {}
    env = {**base_env, **agent.env, **account}
    exe = executable_of(agent)
    head = shutil.which(exe, path=env.get("PATH", os.defpath)) if exe else None
    if agent.provider == "sim":
        return Facts(executable="(built in)", found=True, version="sim")
    if head is None:
        return Facts(executable=exe or "(none)", found=False)
    wrapped = agent.command and agent.provider not in ("command", "acp")
    prefix = [head, *(agent.command[1:] if agent.command and wrapped else ())]
    if agent.provider == "command":
        return Facts(executable=head, found=True)
    cli = cli_of(agent.provider, agent.command)
    version = _run([*prefix, "--version"], env)
    help_run = _run([*prefix, *HELP_ARGS.get(cli, ("--help",))], env)
    help_text = help_run[1] + help_run[2] if help_run and help_run[0] == 0 else None
    logged_in, detail = _login_state(cli, prefix, env)
    return Facts(
        account_env=tuple(sorted(account.items())),
        executable=head,
        found=True,
        version=_first_line(version[1]) if version and version[0] == 0 else None,
        help_text=help_text,
        logged_in=logged_in,
        login_detail=detail,
        accepted=_accepted_hidden(agent, prefix, env, help_text),
    )


def _accepted_hidden(
    agent: AgentConfig, prefix: list[str], env: Mapping[str, str], help_text: str | None
) -> frozenset[str]:
    """Flags relay passes that --help does not list, tried one by one with --version: a CLI
    that does not know a flag refuses it before printing its version."""
    if help_text is None or agent.provider not in HIDES_FLAGS:
        return frozenset()
    own = sample_argv(agent)[len(agent.command or (agent.provider,)) :]
    taken = set()
    for flag, value in hidden_flags(own, help_text):
        done = _run([*prefix, flag, *([value] if value else []), "--version"], env)
        if done is not None and done[0] == 0:
            taken.add(flag)
    return frozenset(taken)


def _login_state(
    provider: str, prefix: list[str], env: Mapping[str, str]
) -> tuple[bool | None, str]:
    """What the CLI can say offline about its login, or the env keys relay will pass it."""
    if provider == "claude":
        if env.get("ANTHROPIC_API_KEY"):
            return True, "(ANTHROPIC_API_KEY)"
        done = _run([*prefix, "auth", "status"], env)
        return _claude_status(done[1]) if done else (None, "")
    if provider == "codex":
        if env.get("CODEX_API_KEY"):
            return True, "(CODEX_API_KEY)"
        done = _run([*prefix, "login", "status"], env)
        return (done[0] == 0, "") if done else (None, "")
    if provider == "gemini":
        return _gemini_login(env)
    return offline_login(provider, env)


def offline_login(provider: str, env: Mapping[str, str]) -> tuple[bool | None, str]:
    """What env keys and credential files say, without running the CLI (qwen, copilot and
    opencode have no offline status command; ``relay agents`` asks this of every CLI)."""
    home = Path(env.get("HOME", str(Path.home())))
    if provider == "claude":
        if env.get("ANTHROPIC_API_KEY") or env.get("CLAUDE_CODE_OAUTH_TOKEN"):
            return True, "(API key or token in env)"
        folder = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
        return (True, "(claude login)") if (folder / ".credentials.json").is_file() else (None, "")
    if provider == "codex":
        if env.get("CODEX_API_KEY"):
            return True, "(CODEX_API_KEY)"
        folder = Path(env.get("CODEX_HOME") or home / ".codex")
        return (True, "(codex login)") if (folder / "auth.json").is_file() else (None, "")
    if provider == "gemini":
        return _gemini_login(env)
    if provider == "qwen":
        return _qwen_login(env, home)
    if provider == "copilot":
        found = next((key for key in COPILOT_TOKENS if env.get(key)), None)
        return (True, f"({found})") if found else (None, "(copilot login: `copilot login`)")
    if provider == "opencode":
        auth = (
            Path(env.get("XDG_DATA_HOME") or home / ".local" / "share") / "opencode" / "auth.json"
        )
        return (
            (True, "(opencode auth)") if _has_keys(auth) else (None, "(providers in opencode.json)")
        )
    return None, ""


def _qwen_login(env: Mapping[str, str], home: Path) -> tuple[bool | None, str]:
    if env.get("OPENAI_API_KEY"):
        return True, "(OPENAI_API_KEY)"
    folder = Path(env.get("QWEN_HOME") or home / ".qwen")
    if (folder / "oauth_creds.json").is_file():
        return True, "(qwen login)"
    settings = folder / "settings.json"
    if settings.is_file() and "selectedType" in settings.read_text(errors="replace"):
        return None, "(auth type in settings.json)"
    return False, ""


def _has_keys(path: Path) -> bool:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(value, dict) and bool(value)


def _claude_status(text: str) -> tuple[bool | None, str]:
    try:
        value = json.loads(text)
    except ValueError:
        return None, ""
    logged = value.get("loggedIn") if isinstance(value, dict) else None
    method = value.get("authMethod") if isinstance(value, dict) else None
    return (logged if isinstance(logged, bool) else None), (f"({method})" if logged else "")


def _gemini_login(env: Mapping[str, str]) -> tuple[bool | None, str]:
    for key in GEMINI_KEYS:
        if env.get(key):
            return True, f"({key})"
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or str(Path.home()))
    if (home / ".gemini" / "oauth_creds.json").is_file():
        return True, "(Google login)"
    settings = home / ".gemini" / "settings.json"
    if settings.is_file() and "selectedType" in settings.read_text(errors="replace"):
        return None, "(auth method in settings.json)"
    return False, ""


def _first_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else None


def diagnose(
    agents: tuple[AgentConfig, ...],
    base_env: Mapping[str, str],
    workspace: Path | None = None,
    host: HostSandbox | None = None,
) -> list[DoctorRow]:
    """Every agent's verdict; ``host`` is the sandbox probe's (run here when not given)."""
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    host = host or probe(base_env.get("PATH"))
    return [
        judge(agent, check_agent(agent, base_env, workspace), is_root, host.problem)
        for agent in agents
    ]
