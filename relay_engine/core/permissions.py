"""Which tool requests an agent may carry out without asking anyone.

Rules are written in Claude Code's syntax, whatever CLI asks: ``Bash`` (any command),
``Bash(npm test)`` (exactly that command), ``Bash(pytest:*)`` (that command and anything
after it, on a word boundary), ``Bash(git * main)`` (``*`` matches anything; one trailing
`` *`` is optional), ``Edit(src/**)`` (files the agent writes: Edit, Write, MultiEdit,
NotebookEdit), ``Read(docs/*)``, ``WebFetch(domain:example.com)``, ``mcp__server`` or
``mcp__server__tool``, and any other tool by its name. Deny wins over allow; a shell
command made of several (``a && b``, ``a | b``, ``a; b``) is allowed only when every part
is, and denied when any part is. A request no rule decides is asked: of the operator, or
refused, as the policy says.

Pure: requests, rules and decisions are plain values; relay matches them the same way for
every CLI and also hands the rules to a CLI's own flags where it has them.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from relay_engine.contracts.config import AgentConfig, PermissionsConfig, RelayConfig
from relay_engine.contracts.rules import Rule, parse_rules

EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS"})
SHELL_TOOLS = frozenset({"Bash", "Shell", "run_shell_command", "shell", "exec_command"})
QUESTION_TOOLS = frozenset({"AskUserQuestion"})
PLAN_MODE_EXITS = frozenset({"ExitPlanMode"})
STAY_READ_ONLY = (
    "this run is read-only: it may not leave plan mode; give your answer as your final "
    "message instead"
)
_SEPARATORS = {"&&", "||", ";", "|", "&", "\n"}

Effect = Literal["allow", "deny", "ask"]


@dataclass(frozen=True)
class Request:
    """What an agent wants to do: a tool and its input, in the worktree ``cwd``."""

    tool: str
    input: Mapping[str, Any]
    cwd: str | None = None

    @property
    def command(self) -> str | None:
        """The shell command of a shell tool, whatever the CLI calls the field."""
        for name in ("command", "cmd"):
            value = self.input.get(name)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(part, str) for part in value):
                return shlex.join(value)
        return None

    @property
    def path(self) -> str | None:
        for name in ("file_path", "path", "notebook_path", "filePath"):
            value = self.input.get(name)
            if isinstance(value, str):
                return value
        return None


@dataclass(frozen=True)
class Policy:
    """``[permissions]`` of relay.toml, or of one agent (which can only narrow it)."""

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    ask: Literal["operator", "deny"] = "operator"
    ask_timeout_s: float = 30 * 60.0


@dataclass(frozen=True)
class Verdict:
    effect: Effect
    rule: Rule | None = None  # the rule that decided, None when none did
    reason: str = ""


def decide(
    request: Request,
    policy: Policy,
    *,
    narrower: Policy | None = None,
    extra_allow: Sequence[Rule] = (),
    extra_deny: Sequence[Rule] = (),
    read_only: bool = False,
) -> Verdict:
    """Allow, deny or ask. ``narrower`` is an agent's own policy: its denies add to the
    workspace's, and when it lists allows a request must be allowed by both. ``extra_*``
    are the rules an operator added with "always" answers for this task, job or agent.

    A ``read_only`` run (a planner, an assessor, ``access = "read-only"``) asking to leave
    plan mode is refused whatever the rules say: leaving it is how it would start changing
    what it was only to read, and nobody needs to be asked that."""
    if read_only and request.tool in PLAN_MODE_EXITS:
        return Verdict("deny", None, STAY_READ_ONLY)
    deny = (*policy.deny, *(narrower.deny if narrower else ()), *extra_deny)
    hit = _first_match(request, deny, every_part=False)
    if hit is not None:
        return Verdict("deny", hit, f"denied by the rule {hit}")
    allow = (*policy.allow, *extra_allow)
    hit = _first_match(request, allow, every_part=True)
    narrowed = narrower is not None and bool(narrower.allow)
    if hit is not None and narrowed and narrower is not None:
        agent_hit = _first_match(request, (*narrower.allow, *extra_allow), every_part=True)
        if agent_hit is None:
            return Verdict("ask", None, "allowed for the workspace but not for this agent")
    if hit is not None:
        return Verdict("allow", hit, f"allowed by the rule {hit}")
    return Verdict("ask", None, "no rule decides it")


def _first_match(request: Request, rules: Sequence[Rule], *, every_part: bool) -> Rule | None:
    """For a shell command of several parts: ``every_part`` needs one rule per part (allow),
    otherwise one matching part is enough (deny)."""
    command = request.command if request.tool in SHELL_TOOLS else None
    if command is None:
        return next((rule for rule in rules if matches(rule, request)), None)
    parts = split_command(command) or [command]
    found: list[Rule] = []
    for part in parts:
        single = Request(request.tool, {"command": part}, request.cwd)
        rule = next((r for r in rules if matches(r, single)), None)
        if rule is not None and not every_part:
            return rule
        if rule is None and every_part:
            return None
        if rule is not None:
            found.append(rule)
    return found[0] if found else None


def matches(rule: Rule, request: Request) -> bool:
    """Whether one rule covers one request (a shell request of one command)."""
    if not _same_tool(rule.tool, request.tool):
        return False
    if rule.spec is None:
        return True
    if request.tool in SHELL_TOOLS:
        return _command_matches(rule.spec, request.command or "")
    if rule.tool in EDIT_TOOLS or rule.tool in READ_TOOLS:
        return _path_matches(rule.spec, request.path, request.cwd)
    if rule.tool == "WebFetch":
        return _domain_matches(rule.spec, str(request.input.get("url") or ""))
    return False  # a pattern relay cannot read for this tool never matches


def _same_tool(rule_tool: str, tool: str) -> bool:
    if rule_tool == tool:
        return True
    if rule_tool.startswith("mcp__") and tool.startswith(rule_tool + "__"):
        return True  # mcp__server covers every tool of that server
    if rule_tool == "Bash" and tool in SHELL_TOOLS:
        return True  # one rule for every CLI's shell tool
    return rule_tool == "Edit" and tool in EDIT_TOOLS


def _command_matches(spec: str, command: str) -> bool:
    command = " ".join(command.split())
    if spec.endswith(":*"):
        prefix = " ".join(spec[:-2].split())
        return command == prefix or command.startswith(prefix + " ")
    pattern = " ".join(spec.split())
    if pattern.endswith(" *") and pattern.count("*") == 1:
        prefix = pattern[:-2]
        return command == prefix or command.startswith(prefix + " ")
    if "*" not in pattern:
        return command == pattern
    regex = ".*".join(re.escape(piece) for piece in pattern.split("*"))
    return re.fullmatch(regex, command, re.DOTALL) is not None


def _path_matches(spec: str, path: str | None, cwd: str | None) -> bool:
    if path is None:
        return False
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        path = path[len(cwd.rstrip("/")) + 1 :]
    spec = spec.removeprefix("./")
    if spec.endswith("/**"):
        base = spec[:-3]
        return path == base or path.startswith(base + "/")
    return fnmatch.fnmatchcase(path, spec.replace("**/", "*"))


def _domain_matches(spec: str, url: str) -> bool:
    if not spec.startswith("domain:"):
        return False
    host = re.sub(r"^[a-z]+://", "", url).split("/", 1)[0].split(":", 1)[0].lower()
    domain = spec.removeprefix("domain:").lower()
    return host == domain or host.endswith("." + domain)


def split_command(command: str) -> list[str]:
    """The simple commands of a shell line, split on ``&& || ; | &`` outside quotes."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return []  # unbalanced quotes: treat it as one command
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    return [shlex.join(part) for part in parts if part]


def suggested_rule(request: Request) -> Rule:
    """The rule that would have allowed this request, as an "always" answer adds it: a
    shell command's first two words with ``:*``, a file's own path, a tool by its name."""
    command = request.command if request.tool in SHELL_TOOLS else None
    if command is not None:
        parts = split_command(command) or [command]
        words = parts[0].split()
        head = " ".join(words[:2]) if len(words) > 1 and not words[1].startswith("-") else words[0]
        return Rule("Bash", f"{head}:*" if len(parts) == 1 else command)
    if request.tool in EDIT_TOOLS and request.path:
        return Rule("Edit", _relative(request.path, request.cwd))
    return Rule(request.tool)


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def describe(request: Request) -> str:
    """One line for the operator: ``Bash npm test``, ``Edit src/app.py``, ``WebFetch url``."""
    command = request.command if request.tool in SHELL_TOOLS else None
    if command is not None:
        return f"{request.tool} {command}"
    if request.path:
        return f"{request.tool} {_relative(request.path, request.cwd)}"
    if request.tool in QUESTION_TOOLS:
        return f"{request.tool}: {question_text(request.input)}"
    url = request.input.get("url")
    return f"{request.tool} {url}" if isinstance(url, str) else request.tool


def question_text(tool_input: Mapping[str, Any]) -> str:
    """The questions an AskUserQuestion carries, joined for one line."""
    questions = tool_input.get("questions")
    if not isinstance(questions, list):
        return str(tool_input.get("question") or "")
    texts = [q.get("question", "") for q in questions if isinstance(q, dict)]
    return " / ".join(t for t in texts if t)


def workspace_policy(config: PermissionsConfig) -> Policy:
    """relay.toml's ``[permissions]`` as a policy (its rules were checked when it was read)."""
    return Policy(
        allow=parse_rules(config.allow),
        deny=parse_rules(config.deny),
        ask=config.ask,
        ask_timeout_s=config.ask_timeout,
    )


def agent_policy(agent: AgentConfig, workspace: Policy) -> Policy | None:
    """An agent's own ``permissions``, which narrow the workspace's; None without any."""
    own = agent.permissions
    if own is None:
        return None
    return Policy(
        allow=parse_rules(own.allow),
        deny=parse_rules(own.deny),
        ask=own.ask or workspace.ask,
        ask_timeout_s=workspace.ask_timeout_s,
    )


def cli_rules(
    config: RelayConfig, agent: AgentConfig, added: tuple[Sequence[Rule], Sequence[Rule]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(allow, deny) rules for a CLI's own flags, so it decides those without asking: the
    workspace's allows (only those the agent's own list repeats, when it narrows), plus
    "always" answers; every deny. Whatever else a CLI asks, relay decides."""
    workspace = workspace_policy(config.permissions)
    own = agent_policy(agent, workspace)
    allow = workspace.allow
    if own is not None and own.allow:
        allow = tuple(rule for rule in own.allow if rule in workspace.allow)
    deny = (*workspace.deny, *(own.deny if own is not None else ()))
    extra_allow, extra_deny = added
    return (
        tuple(dict.fromkeys(str(r) for r in (*allow, *extra_allow))),
        tuple(dict.fromkeys(str(r) for r in (*deny, *extra_deny))),
    )
