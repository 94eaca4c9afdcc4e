"""What an agent may see and touch: its sandbox's command line and its environment.

Pure: the launch path (:mod:`relay_engine.agents.sandbox`) gathers the facts -- which paths
exist, where a worktree's git directory lives, whether bubblewrap works on this host -- and
these functions turn them into the ``bwrap`` argv, the agent's environment and the choice
of sandbox and network, so every rule is a row in a table test.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_PASSTHROUGH = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
    # A CLI behind a proxy or a private CA cannot reach its API without these.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
)
"""Engine variables every agent gets; a provider adds its own auth variables, an agent its
``env_passthrough``. Everything else of the engine's environment stays with the engine."""

PRIVATE_TMP = "/tmp"
HIDDEN_DIR_MODE = "0111"  # can be crossed to reach a path made visible inside, never listed


@dataclass(frozen=True)
class SandboxSpec:
    """One agent's view of the filesystem. Paths are absolute and normalised.

    Everything is read-only except ``writable``; ``protected`` stays read-only even inside
    a writable path; ``visible`` paths are re-exposed read-only where a mask (the private
    /tmp, a hidden directory) or a writable path above them would change what they are;
    hidden paths are covered: a directory by an empty tmpfs nobody can list, a file by
    /dev/null (which a bind mount makes unreadable).
    """

    cwd: str
    writable: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    visible: tuple[str, ...] = ()
    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()
    network: bool = True
    private_tmp: bool = True


# Which mount wins when one path is named twice: protection over writing over showing over
# hiding (a path made visible on purpose is not hidden; a link relay's own git follows is
# never writable, whatever else says so).
_RANK = {"hidden": 0, "visible": 1, "writable": 2, "protected": 3}


def bwrap_argv(bwrap: str, spec: SandboxSpec) -> list[str]:
    """The command that runs an agent inside ``spec``; the agent's own argv follows it.

    Mounts are applied parents first (sorted by depth), so a writable worktree inside the
    read-only root, a protected file inside the writable worktree and a hidden ``~/.ssh``
    inside a visible home all come out as meant. ``--unshare-pid`` makes the sandbox's
    processes die with it (the kernel kills a pid namespace whose first process exits);
    ``--cap-drop ALL`` matters when relay runs as root, whose capabilities would otherwise
    let the agent remount ``/`` read-write.
    """
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if spec.private_tmp:
        argv += ["--tmpfs", PRIVATE_TMP]
    for kind, path in _mounts(spec):
        argv += _mount_args(kind, path)
    argv += ["--unshare-pid", "--unshare-ipc"]
    if not spec.network:
        argv.append("--unshare-net")
    return [*argv, "--die-with-parent", "--cap-drop", "ALL", "--chdir", spec.cwd, "--"]


def _mounts(spec: SandboxSpec) -> list[tuple[str, str]]:
    """The mounts in the order bwrap applies them: parents first."""
    hidden_dirs = {posixpath.normpath(path) for path in spec.hidden_dirs}
    above = {PRIVATE_TMP: "mask"} if spec.private_tmp else {}
    mounts = []
    by_depth = sorted(_strongest(spec).items(), key=lambda item: (_depth(item[0]), item[0]))
    for path, named in by_depth:
        if named == "visible" and _covering(path, above) in (None, "visible"):
            continue  # nothing above it changes it (or it is shown already): no mount needed
        kind = "hidden-file" if named == "hidden" and path not in hidden_dirs else named
        above[path] = "mask" if kind == "hidden" else kind
        mounts.append((kind, path))
    return mounts


def _covering(path: str, above: dict[str, str]) -> str | None:
    """What the deepest mount at or above ``path`` is (None: only the read-only root)."""
    covering = [(len(top), kind) for top, kind in above.items() if _within(path, top)]
    return max(covering)[1] if covering else None


def _strongest(spec: SandboxSpec) -> dict[str, str]:
    """Each path once, with the strongest kind it was named with."""
    chosen: dict[str, str] = {}
    named = (
        ("hidden", (*spec.hidden_dirs, *spec.hidden_files)),
        ("visible", spec.visible),
        ("writable", spec.writable),
        ("protected", spec.protected),
    )
    for kind, paths in named:
        for path in paths:
            key = posixpath.normpath(path)
            if key not in chosen or _RANK[kind] > _RANK[chosen[key]]:
                chosen[key] = kind
    return chosen


def _mount_args(kind: str, path: str) -> list[str]:
    if kind == "writable":
        return ["--bind-try", path, path]
    if kind == "hidden":
        return ["--perms", HIDDEN_DIR_MODE, "--tmpfs", path]
    if kind == "hidden-file":
        return ["--ro-bind-try", "/dev/null", path]
    return ["--ro-bind-try", path, path]


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _depth(path: str) -> int:
    return len([part for part in path.split("/") if part])


# --- the environment --------------------------------------------------------------------------


def env_allowed(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` is on the allow-list: exact names, or prefixes ending in ``*``."""
    return _AllowList.of(tuple(patterns)).allows(name)


@dataclass(frozen=True)
class _AllowList:
    """An allow-list split once into exact names and prefixes: every launch filters the
    engine's whole environment through it, name by name."""

    names: frozenset[str]
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, patterns: tuple[str, ...]) -> _AllowList:
        prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
        return cls(frozenset(p for p in patterns if not p.endswith("*")), prefixes)

    def allows(self, name: str) -> bool:
        return name in self.names or name.startswith(self.prefixes)


def agent_environment(
    engine_env: Mapping[str, str],
    allowed: Iterable[str],
    own: Mapping[str, str],
    *,
    private_tmp: bool = False,
) -> dict[str, str]:
    """The agent's whole environment: the allowed part of the engine's, then its own.

    ``own`` is what relay and the agent's config set (the agent's ``env``, the adapter's
    variables, the RELAY_* ones), which always wins. Inside the sandbox TMPDIR is the
    private /tmp, unless the agent's own env says otherwise: the engine's TMPDIR may be a
    folder the agent cannot write there.
    """
    allow = _AllowList.of(tuple(allowed))
    env = {name: value for name, value in engine_env.items() if allow.allows(name)}
    if private_tmp:
        env["TMPDIR"] = PRIVATE_TMP
    return {**env, **own}


# --- which sandbox, which network ------------------------------------------------------------


@dataclass(frozen=True)
class SandboxChoice:
    kind: str  # "bwrap" | "none"
    network: str  # "on" | "off" (what the agent really gets)
    why: str  # how it was decided, for the packet and `relay doctor`
    problem: str | None = None  # containment was asked for and this host cannot give it


def choose_sandbox(
    sandbox: str | None,
    network: str | None,
    *,
    sandboxed_by_default: bool,
    needs_network: bool,
    host_problem: str | None,
) -> SandboxChoice:
    """An agent's sandbox from its settings (None: unset) and what the host can do.

    Unset means the provider's default: bwrap where it works, else none -- but an explicit
    ``sandbox = "bwrap"`` or ``network = "off"`` that the host cannot honour is a problem,
    never a silent run without containment.
    """
    wanted_network = network or ("on" if needs_network else "off")
    demanded = sandbox == "bwrap" or network == "off"
    if sandbox == "none" or (sandbox is None and not sandboxed_by_default and not demanded):
        why = "configured" if sandbox == "none" else "this provider runs unsandboxed by default"
        return SandboxChoice("none", "on", why)
    if host_problem is None:
        why = "configured" if sandbox == "bwrap" else "default (bwrap works here)"
        return SandboxChoice("bwrap", wanted_network, why)
    if demanded:
        asked = 'sandbox = "bwrap"' if sandbox == "bwrap" else 'network = "off"'
        return SandboxChoice("none", "on", "unavailable", f"{asked}, but {host_problem}")
    return SandboxChoice("none", "on", f"no sandbox: {host_problem}")
