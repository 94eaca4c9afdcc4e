"""The sandbox an agent runs in: whether bubblewrap works on this host, and what one launch
may see and touch.

The rules live in :mod:`relay_engine.core.sandbox` (pure); this module gathers the facts
they need -- the probe's verdict, where a worktree's git directory is, which secret paths
exist -- and hands back the ``bwrap`` argv the supervisor puts in front of the agent's own.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay_engine.agents.adapters import STATE_PATHS
from relay_engine.agents.adapters.base import Adapter
from relay_engine.agents.runner import AGENT_DIR
from relay_engine.contracts.config import CONFIG_FILE, AgentConfig, split_sandbox_path
from relay_engine.core.sandbox import (
    DEFAULT_PASSTHROUGH,
    SandboxChoice,
    SandboxSpec,
    bwrap_argv,
    choose_sandbox,
)

PROBE_TIMEOUT_S = 10.0
HIDDEN_IN_HOME = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".vault-token",
    ".terraform.d",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
)
"""Credentials an agent never needs to do its task; ``sandbox_paths`` can show one."""
HIDDEN_ON_HOST = (
    "/run/user",  # the session's sockets: ssh-agent, gpg-agent, podman, the D-Bus session
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman",
    "/run/containerd",
    "/run/postgresql",  # a local PostgreSQL with peer auth would be relay's own database
    "/var/run/postgresql",
)
"""Sockets a read-only mount does not stop anyone connecting to."""
NAMESPACE_HINT = (
    "unprivileged user namespaces look disabled (sysctl kernel.unprivileged_userns_clone=1, "
    "user.max_user_namespaces > 0, or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0)"
)


@dataclass(frozen=True)
class HostSandbox:
    """What the probe found: the bwrap executable, and why it cannot be used (None: it can)."""

    bwrap: str | None
    problem: str | None
    detail: str = ""


def probe(search_path: str | None = None) -> HostSandbox:
    """Run bwrap the way an agent launch does (every namespace, network off) around ``true``:
    installed is not enough, the kernel may refuse it namespaces."""
    bwrap = shutil.which("bwrap", path=search_path)
    if bwrap is None:
        return HostSandbox(None, "bwrap is not installed (apt-get install bubblewrap)")
    argv = [*bwrap_argv(bwrap, SandboxSpec(cwd="/", network=False)), _true(search_path)]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return HostSandbox(bwrap, f"bwrap cannot run here: {error}")
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        hint = f"; {NAMESPACE_HINT}" if "namespace" in said or "uid map" in said else ""
        return HostSandbox(bwrap, f"bwrap cannot run here: {said}{hint}")
    who = "as root, every capability dropped" if os.geteuid() == 0 else "in a user namespace"
    return HostSandbox(bwrap, None, f"{bwrap} works here ({who})")


def _true(search_path: str | None) -> str:
    return shutil.which("true", path=search_path) or "/bin/true"


@functools.cache
def host_sandbox() -> HostSandbox:
    """The probe, once per process: a host does not gain or lose namespaces while relay runs."""
    return probe(os.environ.get("PATH"))


def choice_for(agent: AgentConfig, adapter: Adapter) -> SandboxChoice:
    return choose_sandbox(
        agent.sandbox,
        agent.network,
        sandboxed_by_default=adapter.sandboxed_by_default,
        needs_network=adapter.needs_network,
        host_problem=host_sandbox().problem,
    )


def passthrough_for(agent: AgentConfig, adapter: Adapter) -> tuple[str, ...]:
    """The engine variables this agent gets: the default list, its provider's, its own."""
    return (*DEFAULT_PASSTHROUGH, *adapter.auth_env, *agent.env_passthrough)


# --- one launch's view of the filesystem -------------------------------------------------------


@dataclass
class _Grants:
    writable: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    visible: list[str] = field(default_factory=list)

    def add(self, other: _Grants) -> None:
        self.writable += other.writable
        self.protected += other.protected
        self.visible += other.visible


RELAY_RUNTIME = sorted(
    {
        str(Path(p).resolve())
        for p in (sys.prefix, sys.base_prefix, Path(__file__).resolve().parents[2])
    }
)
"""Relay's Python and its own source, shown read-only: the sim agent, the memory server and
the merge-checks runner are relay's interpreter running relay's code, and a checkout or
virtualenv under /tmp would otherwise vanish under the sandbox's private /tmp."""


@dataclass(frozen=True)
class Site:
    """Where a launch happens: the facts a sandbox is cut from."""

    cwd: Path
    workspace: Path
    artifacts: Path
    env: Mapping[str, str]  # the agent's own, whole environment (HOME, state overrides)
    account_dirs: tuple[str, ...] = ()  # a named account's CLI folders: its login and state


def sandbox_spec(site: Site, agent: AgentConfig, adapter: Adapter, network: bool) -> SandboxSpec:
    """Read-only everything; writable: the task's folder and the git entries a commit in it
    writes, the execution's ``agent/`` folder, the CLI's own state; hidden: credentials,
    other CLIs' state, host sockets and relay.toml (agents' keys live in it)."""
    home = site.env.get("HOME") or None
    cwd = _real(site.cwd)
    grants = _work_folder(cwd, _real(site.workspace))
    grants.visible.append(_real(site.workspace))  # read-only, even under the private /tmp
    grants.visible += RELAY_RUNTIME  # what relay's own agents run on (sim, memory server)
    # Only agent/ of its artifact folder: relay later reads stdout.txt and rewrites it (a
    # planted symlink there would have relay write a host file), and recovery trusts
    # process.json; the agent's result goes to agent/result.json.
    grants.visible.append(_real(site.artifacts))
    grants.writable.append(_real(site.artifacts / AGENT_DIR))
    state = [_real(p) for p in own_state(adapter, site.env, home)]
    state += [_real(p) for p in site.account_dirs if _real(p) not in state]
    grants.writable += state
    grants.protected += [
        path
        for folder in state
        for name in adapter.state_read_only
        if os.path.lexists(path := os.path.join(folder, name))
    ]
    if home:
        grants.visible.append(_real(home))
    for entry in agent.sandbox_paths:
        path, writable = split_sandbox_path(entry)
        (grants.writable if writable else grants.visible).append(_real(_expand(path, home)))
    hidden_dirs, hidden_files = _hidden(adapter, home, site.workspace)
    return SandboxSpec(
        cwd=cwd,
        writable=tuple(grants.writable),
        protected=tuple(grants.protected),
        visible=tuple(grants.visible),
        hidden_dirs=hidden_dirs,
        hidden_files=hidden_files,
        network=network,
    )


def own_state(adapter: Adapter, env: Mapping[str, str], home: str | None) -> list[str]:
    """The CLI's state paths (``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` when the agent sets them).

    A missing folder is made now (with its parents, inside an existing home): inside, the
    read-only home would refuse it, codex fails outright without its CODEX_HOME, and opencode
    without ~/.local/share/opencode.
    """
    moved = env.get(adapter.state_env) if adapter.state_env else None
    folders = (*((moved,) if moved else adapter.state_paths), *adapter.cache_paths)
    files = () if moved else adapter.state_files
    usable = [p for p in (*folders, *files) if home or not p.startswith("~")]
    for folder in (_expand(p, home) for p in folders if p in usable):
        inside_home = home is not None and os.path.isdir(home) and _within(folder, home)
        if not os.path.exists(folder) and (inside_home or os.path.isdir(os.path.dirname(folder))):
            os.makedirs(folder, 0o700, exist_ok=True)
    return [_expand(path, home) for path in usable]


def _work_folder(cwd: str, workspace: str) -> _Grants:
    """The task's folder is writable, unless it is the workspace itself (planners, jobs
    without a repo): writing there would reach relay.toml and .relay/."""
    if _within(workspace, cwd):
        return _Grants(visible=[cwd])
    grants = _Grants(writable=[cwd])
    grants.add(git_entries(Path(cwd)))
    return grants


def git_entries(worktree: Path) -> _Grants:
    """What ``git commit`` in a linked worktree writes, and what must stay as relay made it.

    Writable: the worktree's own git folder (index, HEAD, locks), the object store, and the
    folders holding its branch's ref and reflog. Read-only on top: the ``.git`` file and the
    ``commondir``/``gitdir`` links (rewritten, they would point relay's own git, which runs
    outside the sandbox, at a repository of the agent's making), ``config.worktree``, and
    the object store's packs and alternates.
    """
    dotgit = worktree / ".git"
    if not dotgit.is_file():
        return _Grants()  # a plain folder, or a checkout whose .git is inside it
    text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return _Grants(protected=[str(dotgit)])
    gitdir = Path(_real(worktree / text.removeprefix("gitdir:").strip()))
    common = Path(_real(gitdir / _read(gitdir / "commondir", ".")))
    grants = _Grants(
        writable=[str(gitdir), str(common / "objects")],
        protected=[str(dotgit), *(str(gitdir / name) for name in ("commondir", "gitdir"))],
        visible=[str(common), *([str(common.parent)] if common.name == ".git" else [])],
    )
    grants.protected += [str(common / "objects" / name) for name in ("pack", "info")]
    grants.protected += _worktree_config(gitdir, common)
    ref = _read(gitdir / "HEAD", "").removeprefix("ref: ")
    if ref.startswith("refs/") and ".." not in ref.split("/"):
        grants.writable += [str((common / ref).parent), str((common / "logs" / ref).parent)]
    return grants


def _worktree_config(gitdir: Path, common: Path) -> list[str]:
    """``config.worktree`` is read only with ``extensions.worktreeConfig``; where that is on,
    an empty one is made now, so the agent cannot create its own (a hook path relay would
    run) in the writable git folder. Where it is off, git never reads one."""
    path = gitdir / "config.worktree"
    if not path.exists() and "worktreeconfig" in _read(common / "config", "").lower():
        path.touch()
    return [str(path)] if path.exists() else []


def _hidden(adapter: Adapter, home: str | None, workspace: Path) -> tuple[tuple[str, ...], ...]:
    candidates = [*HIDDEN_ON_HOST, str(workspace / CONFIG_FILE)]
    if home:
        candidates += [os.path.join(home, name) for name in HIDDEN_IN_HOME]
        own = {*adapter.state_paths, *adapter.state_files}  # an ACP agent's are its CLI's
        for provider, paths in STATE_PATHS.items():
            if provider != adapter.provider:
                candidates += [_expand(path, home) for path in paths if path not in own]
    dirs: list[str] = []
    files: list[str] = []
    # Most candidates do not exist: one lstat each rules them out, where resolving every one
    # took a few lstats per path and was the costliest step of a start. A path missing
    # through its own name is missing through the resolved one too.
    for candidate in filter(os.path.lexists, candidates):
        path = _real(candidate)
        if os.path.isdir(path):
            dirs.append(path)
        elif os.path.lexists(path):
            files.append(path)
    return tuple(dict.fromkeys(dirs)), tuple(dict.fromkeys(files))


def describe(choice: SandboxChoice, spec: SandboxSpec | None) -> dict[str, Any]:
    """The sandbox as prompt-packet.json records it (what the detail screen shows)."""
    record: dict[str, Any] = {"kind": choice.kind, "network": choice.network, "why": choice.why}
    if spec is not None:
        record |= {
            "writable": sorted(set(spec.writable)),
            "read_only": sorted(set(spec.protected)),
            "hidden": sorted({*spec.hidden_dirs, *spec.hidden_files}),
            "private_tmp": spec.private_tmp,
        }
    return record


def _expand(path: str, home: str | None) -> str:
    if path == "~" or path.startswith("~/"):
        return (home or "/") + path[1:]
    return path


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read(path: Path, default: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return default
