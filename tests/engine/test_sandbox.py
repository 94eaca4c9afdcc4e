"""Agents that can only touch their own worktree: the bwrap command line and the environment
(pure, as tables), the configuration, and real agents trying to get out."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from gitrepos import git
from helpers import (
    Workspace,
    executions,
    init_repo,
    job_toml,
    jobs,
    requires_sandbox,
    run_until_idle,
    running_engine,
    task_state,
    tasks,
    wait_for,
)

from relay_engine.agents.launch import LaunchRequest, adapter_for, build_launch
from relay_engine.agents.sandbox import passthrough_for
from relay_engine.contracts.config import AgentConfig, ConfigError, parse_config
from relay_engine.core.redaction import Redactor
from relay_engine.core.sandbox import (
    SandboxSpec,
    agent_environment,
    bwrap_argv,
    choose_sandbox,
    env_allowed,
)

HERE = Path(__file__).resolve().parents[1]
REDACT = Redactor.for_agents([])
PROBE = HERE / "sandbox_probe.py"
BWRAP = "/usr/bin/bwrap"


# --- the command line, from a frozen spec -------------------------------------------------------
def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """The mounts after the fixed head, as (what, path): rw, ro, hide-dir, hide-file, tmp."""
    found, i = [], 8
    while argv[i].startswith("--") and argv[i] not in ("--unshare-pid",):
        flag = argv[i]
        if flag == "--perms":
            found.append(("hide-dir", argv[i + 3]))
            i += 4
        elif flag == "--tmpfs":
            found.append(("tmp", argv[i + 1]))
            i += 2
        else:
            source, target = argv[i + 1], argv[i + 2]
            what = {"--bind-try": "rw", "--ro-bind-try": "ro"}[flag]
            found.append(("hide-file" if source == "/dev/null" else what, target))
            i += 3
    return found


def test_the_argv_shape_of_the_smallest_sandbox() -> None:
    assert bwrap_argv(BWRAP, SandboxSpec(cwd="/w", writable=("/w",), network=False)) == [
        *(BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
        *("--tmpfs", "/tmp", "--bind-try", "/w", "/w"),
        *("--unshare-pid", "--unshare-ipc", "--unshare-net", "--die-with-parent"),
        *("--cap-drop", "ALL", "--chdir", "/w", "--"),
    ]


MOUNT_CASES = [
    (
        "a worktree is writable, the .git link inside it is not",
        SandboxSpec(cwd="/w", writable=("/w",), protected=("/w/.git",)),
        [("rw", "/w"), ("ro", "/w/.git")],
    ),
    (
        "parents are mounted before children, whatever order they came in",
        SandboxSpec(
            cwd="/w",
            protected=("/r/.git/objects/pack",),
            writable=("/r/.git/objects", "/r/.git/worktrees/t"),
        ),
        [("rw", "/r/.git/objects"), ("ro", "/r/.git/objects/pack"), ("rw", "/r/.git/worktrees/t")],
    ),
    (
        "a read-only path nothing covers is not mounted again",
        SandboxSpec(cwd="/w", visible=("/etc/ssl", "/home/me")),
        [],
    ),
    (
        "one under the private /tmp is (the workspace of a test, say)",
        SandboxSpec(cwd="/w", visible=("/tmp/ws",)),
        [("ro", "/tmp/ws")],
    ),
    (
        "what a shown folder shows is not mounted again, unless a writable one is between",
        SandboxSpec(
            cwd="/w",
            visible=("/tmp/ws", "/tmp/ws/.relay/artifacts/e", "/tmp/ws/t/keep"),
            writable=("/tmp/ws/t",),
        ),
        [("ro", "/tmp/ws"), ("rw", "/tmp/ws/t"), ("ro", "/tmp/ws/t/keep")],
    ),
    (
        "a read-only path inside a writable one stays read-only",
        SandboxSpec(cwd="/w", writable=("/d",), visible=("/d/keep",)),
        [("rw", "/d"), ("ro", "/d/keep")],
    ),
    (
        "hidden: a folder under an unlistable tmpfs, a file under /dev/null",
        SandboxSpec(cwd="/w", hidden_dirs=("/h/.ssh",), hidden_files=("/h/.netrc",)),
        [("hide-file", "/h/.netrc"), ("hide-dir", "/h/.ssh")],
    ),
    (
        "a path inside a hidden folder can still be shown",
        SandboxSpec(cwd="/w", hidden_dirs=("/h/.ssh",), visible=("/h/.ssh/known_hosts",)),
        [("hide-dir", "/h/.ssh"), ("ro", "/h/.ssh/known_hosts")],
    ),
    (
        "shown beats hidden; protected beats writable",
        SandboxSpec(
            cwd="/w",
            hidden_dirs=("/h/.aws",),
            visible=("/h/.aws",),
            writable=("/a/f",),
            protected=("/a/f",),
        ),
        [("ro", "/a/f")],
    ),
    (
        "writable beats hidden (the CLI's own state is another's secret)",
        SandboxSpec(cwd="/w", hidden_dirs=("/h/.codex",), writable=("/h/.codex",)),
        [("rw", "/h/.codex")],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [c[1:] for c in MOUNT_CASES], ids=[c[0] for c in MOUNT_CASES]
)
def test_mounts(spec: SandboxSpec, expected: list[tuple[str, str]]) -> None:
    assert mounts(bwrap_argv(BWRAP, spec)) == [("tmp", "/tmp"), *expected]


def test_without_a_private_tmp_nothing_under_it_needs_showing() -> None:
    spec = SandboxSpec(cwd="/w", visible=("/tmp/ws",), private_tmp=False)
    assert mounts(bwrap_argv(BWRAP, spec)) == []


@pytest.mark.parametrize(("network", "unshared"), [(True, False), (False, True)])
def test_network_off_is_a_network_namespace_of_its_own(network: bool, unshared: bool) -> None:
    argv = bwrap_argv(BWRAP, SandboxSpec(cwd="/w", network=network))
    assert ("--unshare-net" in argv) is unshared
    assert argv[-1] == "--" and argv[-3:-1] == ["--chdir", "/w"]


# --- which sandbox, which network -----------------------------------------------------------------
NO_BWRAP = "bwrap is not installed (apt-get install bubblewrap)"
CHOICES = [
    # sandbox, network, sandboxed by default, needs network, host problem -> kind, network, problem?
    (None, None, True, True, None, "bwrap", "on", False),  # claude, codex, gemini
    (None, None, True, False, None, "bwrap", "off", False),  # command
    (None, None, False, False, None, "none", "on", False),  # sim
    (None, "off", False, False, None, "bwrap", "off", False),  # a sim told network = off
    ("bwrap", None, False, False, None, "bwrap", "off", False),
    ("none", None, True, True, None, "none", "on", False),
    (None, "on", True, False, None, "bwrap", "on", False),
    (None, None, True, True, NO_BWRAP, "none", "on", False),  # unset: runs without, doctor warns
    ("bwrap", None, True, True, NO_BWRAP, "none", "on", True),  # asked for: never silently
    (None, "off", True, False, NO_BWRAP, "none", "on", True),
]


@pytest.mark.parametrize(
    ("sandbox", "network", "by_default", "needs", "host", "kind", "net", "problem"), CHOICES
)
def test_choose_sandbox(
    sandbox: str | None,
    network: str | None,
    by_default: bool,
    needs: bool,
    host: str | None,
    kind: str,
    net: str,
    problem: bool,
) -> None:
    choice = choose_sandbox(
        sandbox, network, sandboxed_by_default=by_default, needs_network=needs, host_problem=host
    )
    assert (choice.kind, choice.network, choice.problem is not None) == (kind, net, problem)
    if problem:
        assert NO_BWRAP in (choice.problem or "")


# --- the environment --------------------------------------------------------------------------------
ENGINE_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/op",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm",
    "TZ": "UTC",
    "USER": "op",
    "SHELL": "/bin/sh",
    "TMPDIR": "/var/tmp/op",
    "RELAY_DB": "postgresql://relay:pw@db/relay",
    "RELAY_TEST_PG_URL": "postgresql://postgres:relay@127.0.0.1/t",
    "RELAY_CRASH_AT": "spawned:kill:1",
    "GH_TOKEN": "gho_x",
    "GITHUB_TOKEN": "ghp_x",
    "ANTHROPIC_API_KEY": "sk-ant",
    "OPENAI_API_KEY": "sk-oai",
    "GEMINI_API_KEY": "gm",
    "CODEX_HOME": "/home/op/.codex-work",
    "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
    "AWS_SECRET_ACCESS_KEY": "aws",
}
BASE = {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER", "SHELL", "TMPDIR"}
ENV_CASES = [
    ("claude", (), BASE | {"ANTHROPIC_API_KEY"}),
    ("codex", (), BASE | {"OPENAI_API_KEY", "CODEX_HOME"}),
    ("gemini", (), BASE | {"GEMINI_API_KEY"}),
    ("command", (), BASE),
    (
        "command",
        ("GH_TOKEN", "RELAY_*"),
        BASE | {"GH_TOKEN", "RELAY_DB", "RELAY_TEST_PG_URL", "RELAY_CRASH_AT"},
    ),
]


@pytest.mark.parametrize(("provider", "passthrough", "expected"), ENV_CASES)
def test_an_agent_gets_the_allow_list_not_the_engines_environment(
    provider: str, passthrough: tuple[str, ...], expected: set[str]
) -> None:
    command = ["true"] if provider == "command" else None
    agent = AgentConfig(
        id="a",
        provider=provider,
        command=command,
        env_passthrough=passthrough,  # type: ignore[arg-type]
    )
    env = agent_environment(ENGINE_ENV, passthrough_for(agent, adapter_for(agent)), {})
    assert set(env) == expected
    assert {k: env[k] for k in expected} == {k: ENGINE_ENV[k] for k in expected}


def test_the_agents_own_settings_win_and_the_sandbox_has_its_own_tmp() -> None:
    own = {"PATH": "/opt/bin", "RELAY_TASK": "j/t"}
    env = agent_environment(ENGINE_ENV, ("PATH", "TMPDIR"), own, private_tmp=True)
    assert env == {"PATH": "/opt/bin", "TMPDIR": "/tmp", "RELAY_TASK": "j/t"}
    mine = agent_environment(ENGINE_ENV, ("TMPDIR",), {"TMPDIR": "/w/tmp"}, private_tmp=True)
    assert mine == {"TMPDIR": "/w/tmp"}


@pytest.mark.parametrize(
    ("name", "patterns", "allowed"),
    [
        ("LC_ALL", ("LC_*",), True),
        ("LC", ("LC_*",), False),
        ("GH_TOKEN", ("GH_TOKEN",), True),
        ("GH_TOKEN_2", ("GH_TOKEN",), False),
        ("ANYTHING", ("*",), True),
    ],
)
def test_env_patterns(name: str, patterns: tuple[str, ...], allowed: bool) -> None:
    assert env_allowed(name, patterns) is allowed


def test_a_launch_records_its_sandbox_and_keeps_the_engines_secrets(tmp_path: Path) -> None:
    """build_launch is where the allow-list is applied; the packet says what the agent got."""
    agent = AgentConfig(id="cmd", provider="command", command=("true",), sandbox="none")
    request = LaunchRequest(
        execution_id="e1",
        task_key="j/t",
        job_id="j",
        attempt=1,
        prompt="hi",
        cwd=tmp_path,
        timeout_s=60,
        agent=agent,
    )
    spec = build_launch(tmp_path, request, ENGINE_ENV, Redactor.for_agents([]))
    assert "RELAY_DB" not in spec.env and "GH_TOKEN" not in spec.env
    assert spec.env["RELAY_TASK"] == "j/t" and spec.env["PATH"] == ENGINE_ENV["PATH"]
    packet = json.loads((tmp_path / ".relay/artifacts/e1/prompt-packet.json").read_text())
    assert packet["sandbox"] == {"kind": "none", "network": "on", "why": "configured"}
    assert packet["env_passed"] == sorted(BASE)
    assert spec.argv == ["true"] and spec.sandbox_argc == 0


# --- configuration ------------------------------------------------------------------------------------
def config(text: str, tmp_path: Path) -> Any:
    return parse_config(text, tmp_path / "relay.toml")


AGENT = '[[agents]]\nid = "c"\nprovider = "command"\ncommand = ["true"]\n'


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('sandbox = "firejail"', "agents[0] (c).sandbox: Input should be 'bwrap' or 'none'"),
        ('network = "maybe"', "agents[0] (c).network: Input should be 'on' or 'off'"),
        (
            'sandbox_paths = ["data"]',
            "agents[0] (c).sandbox_paths[0]: 'data': a sandbox path is absolute or starts with ~/",
        ),
        ('sandbox_paths = ["~user/x"]', "a sandbox path is absolute or starts with ~/"),
        (
            'env_passthrough = ["GH-TOKEN"]',
            "agents[0] (c).env_passthrough[0]: 'GH-TOKEN': an environment variable name",
        ),
        ('sandbox = "none"\nnetwork = "off"', 'agents[0] (c): network = "off" needs the sandbox'),
        ('sandbox_path = ["/x"]', "agents[0] (c).sandbox_path: Extra inputs are not permitted"),
    ],
)
def test_bad_sandbox_settings_name_the_field(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(AGENT + extra + "\n", tmp_path)
    assert message in str(raised.value)


def test_good_sandbox_settings_and_the_engines_default(tmp_path: Path) -> None:
    text = (
        '[engine]\nsandbox = "none"\n'
        + AGENT
        + 'sandbox_paths = ["/data", "~/.aws", "/srv/out:rw", "/srv/in:ro"]\n'
        + 'env_passthrough = ["GH_TOKEN", "MY_*"]\n'
        + '[[agents]]\nid = "b"\nprovider = "claude"\nsandbox = "bwrap"\nnetwork = "off"\n'
    )
    parsed = config(text, tmp_path)
    first, second = parsed.agents
    assert first.sandbox == "none" and second.sandbox == "bwrap"  # the engine's, then its own
    assert first.env_passthrough == ("GH_TOKEN", "MY_*")
    assert 'sandbox = "none": `sandbox_paths` is ignored' in parsed.warnings()[0]
    with pytest.raises(ConfigError, match=r"engine.sandbox: Input should be"):
        config('[engine]\nsandbox = "yes"\n' + AGENT, tmp_path)


def test_configs_without_sandbox_settings_stay_valid(tmp_path: Path) -> None:
    parsed = config(AGENT + '[[agents]]\nid = "s"\nprovider = "sim"\n', tmp_path)
    assert [(a.sandbox, a.network, a.sandbox_paths) for a in parsed.agents] == [
        (None, None, ())
    ] * 2
    init = subprocess.run(
        [sys.executable, "-m", "relay_engine.cli.main", "--workspace", str(tmp_path), "init"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    parse_config((tmp_path / "relay.toml").read_text(), tmp_path / "relay.toml")


# --- real agents trying to get out ----------------------------------------------------------------------
def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(path: Path) -> list[str]:
    return sorted(os.listdir(path))


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on the host's 127.0.0.1 that accepts connections (never read)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def prober_setup(tmp_path: Path, port: int) -> tuple[Workspace, Path, dict[str, str]]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    (tmp_path / "drop").mkdir()
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    repo = init_repo(tmp_path / "repo")
    token = uuid.uuid4().hex
    plan = {
        "home": str(home),
        "database": str(ws.path / ".relay" / "relay.db"),
        "sibling": str(ws.path / ".relay" / "worktrees" / "j" / "sibling"),
        "checkout": str(repo),
        "drop": str(tmp_path / "drop"),
        "port": str(port),
        "go": str(ws.path / "go"),
        "release": str(ws.path / "release"),
        "token": token,
    }
    return ws, repo, plan


def attacked(plan: dict[str, str], probe_tree: Path, artifacts: Path) -> dict[str, object]:
    """Everything the probe tries to change, as bytes (hashes) and listings."""
    home, sibling = Path(plan["home"]), Path(plan["sibling"])
    return {
        "record": sha(artifacts / "process.json"),
        "artifacts": listing(artifacts),
        "database": sha(Path(plan["database"])),
        "sibling": (listing(sibling), sha(sibling / "sibling.txt")),
        "checkout": (listing(Path(plan["checkout"])), sha(Path(plan["checkout"]) / "README.md")),
        "home": listing(home),
        "etc": [n for n in os.listdir("/etc") if n.startswith("relay-sandbox-")],
        "parent": listing(probe_tree.parent),
        "ssh": sha(home / ".ssh" / "id_ed25519"),
        "shared": sha(home / ".aws" / "config"),
    }


def run_prober(
    tmp_path: Path, port: int, sandbox: str, network: str | None
) -> tuple[dict[str, Any], dict[str, object], dict[str, object], str]:
    ws, repo, plan = prober_setup(tmp_path, port)
    agent: dict[str, Any] = {
        "id": "prober",
        "provider": "command",
        "command": [sys.executable, str(PROBE)],
        "env": {"PROBE_PLAN": json.dumps(plan), "HOME": plan["home"]},
        "sandbox": sandbox,
        "sandbox_paths": ["~/.aws", f"{plan['drop']}:rw"],
    }
    if network:
        agent["network"] = network
    ws.configure(capacity=2, agents=[agent])
    definitions = [{"id": "probe", "max_attempts": 1}, {"id": "sibling", "max_attempts": 1}]
    ws.submit(job_toml("j", definitions, repo=str(repo), review=False, troubleshoot=False))
    store = ws.store()
    probe_tree = ws.path / ".relay" / "worktrees" / "j" / "probe"
    try:
        with running_engine(ws.engine()):
            wait_for((probe_tree / "ready").exists, what="the probe to be ready")
            (run,) = [e for e in executions(store) if e.task_key == "j/probe"]
            artifacts = Path(run.artifact_dir or "")
            before = attacked(plan, probe_tree, artifacts)
            Path(plan["go"]).write_text("")
            wait_for((probe_tree / "done").exists, what="the probe to finish")
            after = attacked(plan, probe_tree, artifacts)
            Path(plan["release"]).write_text("")
            wait_for(lambda: jobs(store)["j"].state != "ACTIVE", what="the job to finish")
        stdout = (artifacts / "stdout.txt").read_text()
        report = json.loads(stdout.split("PROBE ", 1)[1].splitlines()[0])
        assert task_state(store, "j/probe") == "SUCCEEDED", tasks(store)["j/probe"].error
        packet = json.loads((artifacts / "prompt-packet.json").read_text())
        assert packet["sandbox"]["kind"] == sandbox
        assert tasks(store)["j/probe"].result_summary == "probed"  # the result file counted
        return report, before, after, plan["token"]
    finally:
        ws.close()
        for leftover in Path("/etc").glob(f"relay-sandbox-{plan['token']}"):
            leftover.unlink()


ENGINE_SECRETS = {
    "GH_TOKEN": "gho_engine",
    "GITHUB_TOKEN": "ghp_engine",
    "RELAY_TEST_PG_URL": "postgresql://postgres:pw@127.0.0.1:9/none",
    "AWS_SECRET_ACCESS_KEY": "aws-engine",
    "OPENAI_API_KEY": "sk-engine",  # another provider's: a command agent gets none
}


@pytest.fixture
def engine_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an operator's shell holds when it starts relay (RELAY_DB aside: the engine
    would use it)."""
    for name, value in ENGINE_SECRETS.items():
        monkeypatch.setenv(name, value)


def assert_no_engine_secrets(report: dict[str, Any]) -> None:
    names = set(report["env"]["names"])
    assert not names & {*ENGINE_SECRETS, "RELAY_DB"}, names
    assert {"PATH", "HOME", "RELAY_TASK", "RELAY_RESULT_FILE", "PROBE_PLAN"} <= names


OUTSIDE = ("database", "sibling", "checkout", "home", "etc", "parent", "record", "artifacts")


@requires_sandbox
@pytest.mark.parametrize("network", ["off", "on"])
@pytest.mark.usefixtures("engine_secrets")
def test_a_sandboxed_agent_writes_its_worktree_and_nothing_else(
    tmp_path: Path, listener: int, network: str
) -> None:
    report, before, after, token = run_prober(tmp_path, listener, "bwrap", network)
    assert_no_engine_secrets(report)
    assert report["worktree"] == report["result"] == {"ok": True}
    for what in OUTSIDE:
        assert report[what]["ok"] is False, what
        assert report[what]["error"] in ("EROFS", "EACCES", "ENOENT"), (what, report[what])
    assert after == before  # byte for byte: the database, the checkout, the sibling, home
    db = Path(tmp_path / "ws" / ".relay" / "relay.db")
    assert token.encode() not in db.read_bytes()
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert report["ssh"] == {"ok": False, "error": "EACCES"}  # ls ~/.ssh fails
    assert report["shared-read"] == {"ok": True}  # ~/.aws is in sandbox_paths, read-only
    assert report["shared-write"]["ok"] is False
    assert report["drop"] == {"ok": True}  # ":rw"
    assert (tmp_path / "drop" / f"x-{token}").read_text() == token
    # network = "off": its own loopback only, where nothing listens; "on": the host's
    assert report["network"] == (
        {"ok": True} if network == "on" else {"ok": False, "error": "ECONNREFUSED"}
    )


@requires_sandbox
@pytest.mark.usefixtures("engine_secrets")
def test_the_same_agent_without_the_sandbox_does_all_of_it(tmp_path: Path, listener: int) -> None:
    """So the test above proves the sandbox, not a timid agent (the environment is the
    allow-list either way)."""
    report, before, after, _ = run_prober(tmp_path, listener, "none", None)
    assert_no_engine_secrets(report)
    can_write_etc = os.access("/etc", os.W_OK)
    everything = ("worktree", "result", *OUTSIDE, "network", "ssh", "shared-read", "shared-write")
    for what in (*everything, "drop"):
        expected = can_write_etc if what == "etc" else True
        assert report[what]["ok"] is expected, (what, report[what])
    changed = {what for what in before if before[what] != after[what]}
    assert changed >= {"sibling", "checkout", "home", "parent", "shared", "record", "artifacts"} | (
        {"etc"} if can_write_etc else set()
    )


@requires_sandbox
def test_a_sandboxed_agents_commit_is_merged_into_the_job_branch(tmp_path: Path) -> None:
    """git commit works inside (the minimal writable set of the worktree's git entries), and
    what the agent leaves uncommitted is committed by relay, outside, as without a sandbox."""
    repo = init_repo(tmp_path / "repo")
    script = (
        "set -e; echo committed > a.txt; git add a.txt;"
        " git -c user.name=agent -c user.email=agent@example.invalid commit -qm 'agent: a.txt';"
        " echo left > b.txt"
    )
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    agent = {
        "id": "editor",
        "provider": "command",
        "command": ["sh", "-c", script],
        "sandbox": "bwrap",
    }
    ws.configure(agents=[agent])
    ws.submit(job_toml("j", [{"id": "t", "max_attempts": 1}], repo=str(repo), review=False))
    try:
        assert run_until_idle(ws.engine()) is True
        store = ws.store()
        assert task_state(store, "j/t") == "SUCCEEDED"
        (run,) = executions(store)
        assert (run.argv or [""])[0].endswith("bwrap")  # the argv as run, sandbox included
        shown = ws.cli("status", "j/t")  # the task's detail says where it ran
        (line,) = [ln for ln in shown.stdout.splitlines() if ln.strip().startswith("sandbox:")]
        assert line.strip().startswith("sandbox: bwrap, network off, writes ")
        assert str(ws.path / ".relay" / "worktrees" / "j" / "t") in line
        detail = json.loads(ws.cli("status", "j/t", "--json").stdout)
        (task,) = [t for t in detail["tasks"] if t["id"] == "t"]
        assert task["executions"][0]["sandbox"]["kind"] == "bwrap"
    finally:
        ws.close()
    files = git(repo, "ls-tree", "--name-only", "relay/j").split()
    assert {"a.txt", "b.txt", "README.md"} <= set(files)
    assert git(repo, "show", "relay/j:a.txt").strip() == "committed"
    log = git(repo, "log", "--format=%an %s", "relay-tasks/j/t")
    assert "agent agent: a.txt" in log  # the agent's own commit, made inside the sandbox
    assert git(repo, "fsck", "--no-progress").strip() == ""


# --- relay doctor, and hosts where bwrap cannot run -----------------------------------------------
NAMESPACE_REFUSAL = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not "
    "allow non-privileged user namespaces."
)


def broken_bwrap(folder: Path) -> str:
    """A PATH whose first bwrap fails as it does where user namespaces are off."""
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{NAMESPACE_REFUSAL}' >&2\nexit 1\n")
    fake.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def doctor(ws: Workspace, path: str | None = None) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "PATH": path} if path else None
    done = subprocess.run(
        ws.cli_argv("doctor", "--json"), capture_output=True, text=True, env=env, check=False
    )
    return done.returncode, json.loads(done.stdout)


DOCTOR_AGENTS = [
    {"id": "tests", "provider": "command", "command": [sys.executable, "-c", "pass"]},
    {"id": "online", "provider": "command", "command": ["true"], "network": "on"},
    {"id": "loose", "provider": "command", "command": ["true"], "sandbox": "none"},
    {"id": "sim", "provider": "sim"},
]


@pytest.fixture
def doctor_ws(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    ws.configure(agents=DOCTOR_AGENTS)
    yield ws
    ws.close()


@requires_sandbox
def test_doctor_says_the_sandbox_works_and_what_each_agent_runs_in(doctor_ws: Workspace) -> None:
    code, report = doctor(doctor_ws)
    assert code == 0, report
    assert report["sandbox"]["works"] is True and report["sandbox"]["problem"] is None
    assert report["supervisor"].startswith("native (")  # the fallback: test_native_engine.py
    rows = {row["agent"]: (row["sandbox"], row["network"]) for row in report["agents"]}
    assert rows == {
        "tests": ("bwrap", "off"),
        "online": ("bwrap", "on"),
        "loose": ("none (configured)", "on"),
        "sim": ("none (this provider runs unsandboxed by default)", "on"),
    }


def test_doctor_where_user_namespaces_are_off(doctor_ws: Workspace, tmp_path: Path) -> None:
    path = broken_bwrap(tmp_path / "bin")
    strict = {"id": "strict", "provider": "command", "command": ["true"], "sandbox": "bwrap"}
    doctor_ws.configure(agents=[*DOCTOR_AGENTS, strict])
    code, report = doctor(doctor_ws, path)
    assert code == 1  # the agent that asked for a sandbox cannot run
    assert report["sandbox"]["works"] is False
    assert NAMESPACE_REFUSAL in report["sandbox"]["problem"]
    assert "user namespaces look disabled" in report["sandbox"]["problem"]
    rows = {row["agent"]: row for row in report["agents"]}
    assert rows["tests"]["sandbox"].startswith("none (no sandbox: bwrap cannot run here")
    assert rows["tests"]["problems"] == []  # it asked for nothing: it runs, with a warning
    assert any(w.startswith("no sandbox: bwrap cannot run here") for w in report["warnings"])
    assert rows["strict"]["problems"][0].startswith('sandbox = "bwrap", but bwrap cannot run')
    assert "apt-get install bubblewrap" in rows["strict"]["fix"]


def test_doctor_where_bwrap_is_not_installed(doctor_ws: Workspace, tmp_path: Path) -> None:
    folder = tmp_path / "bin"  # git (GitPython needs it) and true, but no bwrap
    folder.mkdir()
    for tool in ("git", "true"):
        (folder / tool).symlink_to(shutil.which(tool) or tool)
    code, report = doctor(doctor_ws, str(folder))
    assert report["sandbox"] == {
        "works": False,
        "bwrap": None,
        "problem": "bwrap is not installed (apt-get install bubblewrap)",
    }
    assert code == 0  # nobody demanded a sandbox; "tests" runs unsandboxed, with the warning
    rows = {row["agent"]: row["sandbox"] for row in report["agents"]}
    assert rows["tests"] == "none (no sandbox: bwrap is not installed (apt-get install bubblewrap))"


def test_an_agent_that_asks_for_a_sandbox_never_runs_without_one(tmp_path: Path) -> None:
    """The engine's own probe fails: the agent is unavailable (cli-missing, with the fix), its
    task waits on it, and nothing ran unsandboxed."""
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    ws.configure(
        agents=[{"id": "strict", "provider": "command", "command": command, "network": "off"}]
    )
    ws.submit(job_toml("j", [{"id": "t"}], troubleshoot=False))
    env = {**os.environ, "PATH": broken_bwrap(tmp_path / "bin")}
    env.pop("RELAY_DB", None)
    run = subprocess.run(
        ws.cli_argv("run", "--until-idle", "--quiet"),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0, run.stderr
    try:
        assert not marker.exists()
        (agent,) = [a for a in ws.status()["agents"] if a["id"] == "strict"]
        assert agent["status"] == "cli-missing"
        assert agent["reason"].startswith('network = "off", but bwrap cannot run here')
        assert "apt-get install bubblewrap" in agent["fix"]
        assert (
            tasks(ws.store())["j/t"].attempt <= 1 and task_state(ws.store(), "j/t") != "SUCCEEDED"
        )
    finally:
        ws.close()


@requires_sandbox
def test_a_cli_keeps_its_own_state_writable_and_never_sees_anothers(tmp_path: Path) -> None:
    """codex's CODEX_HOME is writable (made if missing: codex fails without it), its config
    is not (the operator's own codex, unsandboxed, would run what an agent put there);
    claude's state, the operator's keys and relay.toml are hidden from it."""
    home = tmp_path / "home"
    for folder in (".claude", ".ssh", ".config/gh", "work/.codex"):
        (home / folder).mkdir(parents=True)
    (home / ".claude.json").write_text("{}")
    (home / "work/.codex/config.toml").write_text('model = "gpt-5"\n')
    (tmp_path / "relay.toml").write_text("")
    agent = AgentConfig(id="cx", provider="codex", env={"HOME": str(home)}, sandbox="bwrap")
    request = LaunchRequest(
        execution_id="e2",
        task_key="j/t",
        job_id="j",
        attempt=1,
        prompt="hi",
        cwd=tmp_path / "tree",
        timeout_s=60,
        agent=agent,
    )
    (tmp_path / "tree").mkdir()
    engine_env = {k: v for k, v in ENGINE_ENV.items() if k != "CODEX_HOME"}  # else it is there
    spec = build_launch(tmp_path, request, engine_env, Redactor.for_agents([]))
    sandbox = json.loads((tmp_path / ".relay/artifacts/e2/prompt-packet.json").read_text())[
        "sandbox"
    ]
    assert (home / ".codex").is_dir()
    assert str(home / ".codex") in sandbox["writable"]
    moved = AgentConfig(
        id="cx",
        provider="codex",
        env={"HOME": str(home), "CODEX_HOME": str(home / "work/.codex")},
        sandbox="bwrap",
    )
    build_launch(tmp_path, replace(request, execution_id="e3", agent=moved), engine_env, REDACT)
    elsewhere = json.loads((tmp_path / ".relay/artifacts/e3/prompt-packet.json").read_text())
    assert str(home / "work/.codex") in elsewhere["sandbox"]["writable"]
    assert str(home / "work/.codex/config.toml") in elsewhere["sandbox"]["read_only"]
    assert str(tmp_path / "tree") in sandbox["writable"]
    hidden = {str(home / name) for name in (".claude", ".claude.json", ".ssh", ".config/gh")}
    assert hidden | {str(tmp_path / "relay.toml")} <= set(sandbox["hidden"])
    assert (sandbox["kind"], sandbox["network"]) == ("bwrap", "on")
    assert spec.argv[spec.sandbox_argc :][:2] == ["codex", "exec"]
    assert spec.argv[spec.sandbox_argc - 1] == "--"
    assert spec.env["TMPDIR"] == "/tmp" and "OPENAI_API_KEY" in spec.env


def test_doctor_warns_that_codexs_own_sandbox_cannot_nest_as_root() -> None:
    from relay_engine.agents.doctor import Facts, judge

    facts = Facts("codex", True, "codex-cli 0.171.0", None, logged_in=True)
    strict = judge(AgentConfig(id="cx", provider="codex"), facts, is_root=True)
    assert strict.ok and 'set access = "full"' in strict.warnings[0]
    full = AgentConfig(id="cx", provider="codex", access="full")
    assert judge(full, facts, is_root=True).warnings == ()
    assert judge(AgentConfig(id="cx", provider="codex"), facts, is_root=False).warnings == ()


def test_relay_reads_an_agents_result_without_following_what_it_planted(tmp_path: Path) -> None:
    """The result file is the agent's: a symlink to a host secret, a FIFO or a huge file must
    read as no result, never as the secret or a hang."""
    from relay_engine.agents.runner import read_agent_file

    secret = tmp_path / "secret"
    secret.write_text("host secret")
    (tmp_path / "link.json").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "big.json").write_text("x" * 100)
    (tmp_path / "ok.json").write_text('{"summary": "done"}')
    assert read_agent_file(tmp_path / "link.json", 1000) is None
    assert read_agent_file(tmp_path / "fifo.json", 1000) is None
    assert read_agent_file(tmp_path / "big.json", 10) is None
    assert read_agent_file(tmp_path / "missing.json", 10) is None
    assert read_agent_file(tmp_path / "ok.json", 1000) == '{"summary": "done"}'
