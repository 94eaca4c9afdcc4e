"""Turning a claimed task into a running agent process: prompt, argv, env, artifacts.

Nothing here touches the database; the engine claims first and records afterwards,
so no transaction is ever held open across a process spawn.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay_engine.agents.adapters import MEMORY_TOOL_PROVIDERS, get_adapter
from relay_engine.agents.adapters.base import Adapter, InvocationContext, McpServer
from relay_engine.agents.runner import (
    AGENT_DIR,
    RESULT_NAME,
    LaunchError,
    LaunchSpec,
    write_artifact_json,
    write_artifact_text,
)
from relay_engine.agents.sandbox import (
    Site,
    choice_for,
    describe,
    host_sandbox,
    passthrough_for,
    sandbox_spec,
)
from relay_engine.contracts.accounts import account_dir, account_env, cli_of
from relay_engine.contracts.config import AgentConfig
from relay_engine.core.failures import AgentFailure, FailureClass, missing
from relay_engine.core.memory import (
    ADDED_FILE,
    MCP_CONFIG_FILE,
    NOTES_FILE,
    SERVER_NAME,
    NoteFacts,
    notes_json,
)
from relay_engine.core.merge_prep import LOG_FILE as CHECKS_LOG
from relay_engine.core.merge_prep import RECORD_FILE as CHECKS_RECORD
from relay_engine.core.redaction import REDACTED, SECRET_NAME, Redactor
from relay_engine.core.sandbox import SandboxChoice, agent_environment, bwrap_argv


@dataclass(frozen=True)
class LaunchRequest:
    execution_id: str
    task_key: str
    job_id: str
    attempt: int
    prompt: str
    cwd: Path
    timeout_s: float
    agent: AgentConfig
    sim_script: dict[str, Any] | None = None
    resume_session_id: str | None = None
    plan_round: int | None = None
    allow_rules: tuple[str, ...] = ()  # relay's permission rules, for the CLI's own flags
    deny_rules: tuple[str, ...] = ()
    permission_channel: bool = True  # the CLI asks relay about what its mode does not allow
    memory: tuple[NoteFacts, ...] | None = None  # the scope's notes: memory tools (None: none)
    checks: tuple[str, ...] = ()  # a merge_prep's repository checks, run after the agent


def artifacts_root(workspace: Path) -> Path:
    return workspace / ".relay" / "artifacts"


def artifact_dir(workspace: Path, execution_id: str) -> Path:
    return artifacts_root(workspace) / execution_id


def adapter_for(agent: AgentConfig) -> Adapter:
    template = agent.command if agent.provider in ("command", "acp") else None
    return get_adapter(agent.provider, command_template=template)


def build_launch(
    workspace: Path,
    request: LaunchRequest,
    base_env: Mapping[str, str],
    redactor: Redactor,
    adapter: Adapter | None = None,
) -> LaunchSpec:
    """Write prompt.md and prompt-packet.json, and return what the runner should start.

    ``base_env`` and ``redactor`` are the engine's: built once per engine, not per launch.
    ``adapter`` is the one whose parser will read this run (an ACP adapter keeps the
    conversation its build began). Only the allow-listed part of ``base_env`` reaches the
    agent, and where the agent is
    sandboxed its argv starts with the ``bwrap`` command (the supervisor stays outside) and
    its result goes to ``agent/result.json``: the rest of the artifact folder -- output relay
    reads and rewrites, the records recovery trusts -- is read-only to it.
    """
    directory = artifact_dir(workspace, request.execution_id)
    prompt_file = write_artifact_text(directory, "prompt.md", request.prompt)
    adapter = adapter or adapter_for(request.agent)
    choice = choice_for(request.agent, adapter)
    if choice.problem:
        raise LaunchError(f"agent {request.agent.id}: {choice.problem}")
    result_name = RESULT_NAME if choice.kind != "bwrap" else f"{AGENT_DIR}/{RESULT_NAME}"
    result_file = directory / result_name
    if result_file.parent != directory:  # the sandboxed agent's own folder
        result_file.parent.mkdir(exist_ok=True)
    serves = request.memory is not None and adapter.provider in MEMORY_TOOL_PROVIDERS
    server = _memory_server(directory, request) if serves else None
    invocation = adapter.build(_context(request, adapter, prompt_file, result_file, server))
    accounts = account_vars(workspace, request.agent)
    own = {**request.agent.env, **accounts, **invocation.env, **_relay_env(request, result_file)}
    allowed = passthrough_for(request.agent, adapter)
    env = agent_environment(base_env, allowed, own, private_tmp=choice.kind == "bwrap")
    site = Site(request.cwd, workspace, directory, env, account_dirs=tuple(accounts.values()))
    wrapper, sandbox = _sandbox(site, request.agent, adapter, choice)
    argv = [*wrapper, *_with_checks(directory, request.checks, invocation.argv)]
    passed = sorted(k for k, v in env.items() if base_env.get(k) == v and k not in own)
    packet = _packet(request, argv, env, redactor) | {"sandbox": sandbox, "env_passed": passed}
    write_artifact_json(directory, "prompt-packet.json", packet)
    return LaunchSpec(
        execution_id=request.execution_id,
        argv=argv,
        cwd=request.cwd,
        env=env,
        timeout_s=request.timeout_s,
        artifact_dir=directory,
        stdin_text=invocation.stdin_text,
        conversation=invocation.conversation,
        sandbox_argc=len(wrapper),
        result_name=result_name,
    )


def _memory_server(directory: Path, request: LaunchRequest) -> McpServer:
    """Write the scope's notes and the MCP config that starts the memory server.

    ``-I``: the server runs with the agent's folder as its working directory, and a planted
    ``relay_engine/`` there must not be what it imports. Notes stay read-only to the agent
    (the execution folder); what it adds goes to its own ``agent/`` folder.
    """
    (directory / AGENT_DIR).mkdir(exist_ok=True)
    notes = write_artifact_text(directory, NOTES_FILE, notes_json(request.memory or ()))
    added = directory / AGENT_DIR / ADDED_FILE
    args: tuple[str, ...] = ("-I", "-m", "relay_engine.agents.memory_server")
    args += ("--notes", str(notes), "--added", str(added), "--task", request.task_key)
    config_file = directory / MCP_CONFIG_FILE
    server = McpServer(SERVER_NAME, sys.executable, args, config_file)
    # alwaysLoad: claude connects --mcp-config servers in the background and would start its
    # first turn (where the prompt says to search the memory) before relay's tools are there.
    entry = {"type": "stdio", "command": server.command, "args": list(args), "alwaysLoad": True}
    write_artifact_json(directory, MCP_CONFIG_FILE, {"mcpServers": {SERVER_NAME: entry}})
    return server


def _with_checks(directory: Path, checks: tuple[str, ...], argv: list[str]) -> list[str]:
    """The agent's argv behind the merge checks' runner (inside the sandbox, like the agent),
    which writes its record and log to the run's ``agent/`` folder."""
    if not checks:
        return argv
    agent_dir = directory / AGENT_DIR
    agent_dir.mkdir(exist_ok=True)
    runner = [sys.executable, "-I", "-m", "relay_engine.agents.merge_checks"]
    runner += ["--record", str(agent_dir / CHECKS_RECORD), "--log", str(agent_dir / CHECKS_LOG)]
    for check in checks:
        runner += ["--check", check]
    return [*runner, "--", *argv]


def _context(
    request: LaunchRequest,
    adapter: Adapter,
    prompt_file: Path,
    result_file: Path,
    memory_server: McpServer | None = None,
) -> InvocationContext:
    command = request.agent.command if request.agent.provider != "command" else None
    return InvocationContext(
        prompt=request.prompt,
        prompt_file=prompt_file,
        result_file=result_file,
        cwd=request.cwd,
        model=request.agent.model,
        resume_session_id=request.resume_session_id if adapter.supports_resume else None,
        tools=request.agent.tools,
        command=_resolve_command(command),
        extra_args=request.agent.args,
        access=request.agent.access,
        permission_channel=request.permission_channel,
        allow_rules=request.allow_rules,
        deny_rules=request.deny_rules,
        memory_server=memory_server,
    )


def _sandbox(
    site: Site, agent: AgentConfig, adapter: Adapter, choice: SandboxChoice
) -> tuple[list[str], dict[str, Any]]:
    """The bwrap command for this launch (empty without a sandbox) and its record."""
    bwrap = host_sandbox().bwrap
    if choice.kind != "bwrap" or bwrap is None:
        return [], describe(choice, None)
    spec = sandbox_spec(site, agent, adapter, network=choice.network == "on")
    return bwrap_argv(bwrap, spec), describe(choice, spec)


def account_vars(workspace: Path, agent: AgentConfig) -> dict[str, str]:
    """A named account's CLI config directory (made if missing), unless the agent's env
    already points the CLI somewhere: ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, …"""
    if not agent.account:
        return {}
    cli = cli_of(agent.provider, agent.command)
    folder = account_dir(workspace / ".relay", cli, agent.account)
    wanted = account_env(cli, folder, agent.env)
    for path in wanted.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    return wanted


def executable_of(agent: AgentConfig) -> str:
    """The program an agent's launch runs: its `command` head, else the provider's CLI."""
    if agent.provider == "command":
        head = agent.command[0] if agent.command else ""
    else:
        head = agent.command[0] if agent.command else agent.provider
    resolved = _resolve_command((head,)) if head else None
    return resolved[0] if resolved else head


def missing_executable(agent: AgentConfig) -> AgentFailure | None:
    """cli-missing when the agent's program is not on the PATH it will run with, or the
    sandbox it asks for cannot run on this host."""
    choice = choice_for(agent, adapter_for(agent))
    if choice.problem:
        fix = 'install bubblewrap (apt-get install bubblewrap), or set sandbox = "none"'
        return AgentFailure(FailureClass.CLI_MISSING, choice.problem, fix)
    if agent.provider == "sim":
        return None
    exe = executable_of(agent)
    if os.sep in exe and not os.path.isabs(exe):
        return None  # relative to the task's folder, which does not exist yet
    search = agent.env.get("PATH", os.environ.get("PATH", os.defpath))
    return None if exe and shutil.which(exe, path=search) else missing(agent.provider, exe)


def _resolve_command(command: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """``python`` in a command means this interpreter, so venv installs find relay."""
    if not command:
        return None
    head = sys.executable if command[0] in ("python", "python3") else command[0]
    return (head, *command[1:])


def _relay_env(request: LaunchRequest, result_file: Path) -> dict[str, str]:
    env = {
        "RELAY_TASK": request.task_key,
        "RELAY_JOB": request.job_id,
        "RELAY_EXECUTION_ID": request.execution_id,
        "RELAY_ATTEMPT": str(request.attempt),
        "RELAY_RESULT_FILE": str(result_file),
    }
    if request.sim_script is not None:
        env["RELAY_SIM_SCRIPT"] = json.dumps(request.sim_script)
    if request.plan_round is not None:
        env["RELAY_PLAN_ROUND"] = str(request.plan_round)
    return env


def display_argv(argv: list[str], prompt: str, redactor: Redactor) -> list[str]:
    """argv as recorded: the prompt (already in prompt.md) shortened, secrets redacted."""
    return [redactor.text("<prompt.md>" if arg == prompt else arg) for arg in argv]


def _packet(
    request: LaunchRequest, argv: list[str], env: dict[str, str], redactor: Redactor
) -> dict[str, Any]:
    relay_vars = {k: redactor.text(v) for k, v in env.items() if k.startswith("RELAY_")}
    agent_vars = {
        k: REDACTED if SECRET_NAME.search(k) else redactor.text(v)
        for k, v in request.agent.env.items()
    }
    return {
        "execution_id": request.execution_id,
        "task": request.task_key,
        "attempt": request.attempt,
        "agent": request.agent.id,
        "provider": request.agent.provider,
        "argv": display_argv(argv, request.prompt, redactor),
        "cwd": str(request.cwd),
        "timeout_s": request.timeout_s,
        "resume_session_id": request.resume_session_id,
        "env": {**agent_vars, **relay_vars},
    }
