"""Every bad input and every database fault is one clear line and exit code 2, data untouched.

The cases are the ones a chaos run found giving tracebacks, hangs or silent damage.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import Workspace, cli_env, job_toml, relay_toml

from relay_engine.store.db import Store
from relay_engine.store.schema import Task

DOTTED_KEYS = '[job]\nid = "bomb"\n' + "a" + ".a" * 50_000 + " = 1\n"
NESTED = '[job]\nid = "bomb"\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n"


@dataclass(frozen=True)
class Case:
    name: str
    prepare: Callable[[Workspace], list[str]]  # writes what it needs, returns the CLI args
    expect: str


def _job(ws: Workspace, text: str, name: str = "bad.toml") -> list[str]:
    return ["submit", str(ws.write_job(text, name))]


def _input_of(size: int) -> Callable[[Workspace], list[str]]:
    return lambda ws: _job(ws, job_toml("big", [{"id": "t", "input": "x" * size}]))


def _agents(ws: Workspace, agents: list[dict[str, object]]) -> list[str]:
    (ws.path / "relay.toml").write_text(relay_toml(agents=agents), encoding="utf-8")
    return ["run", "--until-idle"]


def _deep_plan(ws: Workspace) -> list[str]:
    ws.submit(job_toml("p", [{"id": "t"}]))
    path = ws.path / "plan.json"
    path.write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    return ["plan", "p", "--file", str(path)]


def _db(ws: Workspace, name: str, content: bytes | None) -> list[str]:
    path = ws.path / name
    if content is not None:
        path.write_bytes(content)
    return ["--db", f"sqlite:///{path}", "status"]


def _truncated(ws: Workspace) -> list[str]:
    path = ws.path / "cut.db"
    store = Store(f"sqlite:///{path}")
    with store.write() as session:
        for i in range(60):
            session.add(Task(key=f"j/t{i}", job_id="j", task_id=f"t{i}", input="y" * 2000))
    store.dispose()
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    return ["--db", f"sqlite:///{path}", "status"]


CASES = [
    Case("dotted keys", lambda ws: _job(ws, DOTTED_KEYS), "a key of more than 32 dotted parts"),
    Case("nested brackets", lambda ws: _job(ws, NESTED), "nested more than 32 deep"),
    Case("10 MB task input", _input_of(10 << 20), "over the 1.0 MiB limit"),
    Case("300 KB task input", _input_of(300 << 10), "tasks[0] (t).input: 300 KiB, over the 256"),
    Case(
        "command agent without command",
        lambda ws: _agents(ws, [{"id": "cmd", "provider": "command"}]),
        'agents[0] (cmd): provider "command" needs command = [',
    ),
    Case("deep plan JSON", _deep_plan, "nested more than 32 deep"),
    Case("text file as database", lambda ws: _db(ws, "text.db", b"hello\n" * 20), "not a relay"),
    Case("truncated database", _truncated, ".recover"),
    Case(
        "unreachable server",
        lambda ws: ["--db", "postgresql://relay:pw@127.0.0.1:1/relay", "status"],
        "cannot reach PostgreSQL at 127.0.0.1:1/relay: start the server",
    ),
    Case(
        "unknown dialect",
        lambda ws: ["--db", "mysql://relay@localhost/relay", "status"],
        "pip install 'relay[postgres]'",
    ),
    Case("0-byte database", lambda ws: _db(ws, "zero.db", b""), "empty file (0 bytes)"),
]


def _fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix == ".db"
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_and_database_faults_are_one_line_and_exit_2(
    sqlite_workspace: Workspace, case: Case
) -> None:
    args = case.prepare(sqlite_workspace)
    before = _fingerprint(sqlite_workspace.path)
    result = sqlite_workspace.cli(*args, timeout=60)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, lines
    assert case.expect in " ".join(lines), lines
    assert _fingerprint(sqlite_workspace.path) == before  # no database was touched


def test_a_0_byte_database_is_created_when_asked(sqlite_workspace: Workspace) -> None:
    path = sqlite_workspace.path / ".relay" / "relay.db"
    path.parent.mkdir()
    path.touch()
    assert sqlite_workspace.cli("status").returncode == 2
    assert path.stat().st_size == 0
    assert sqlite_workspace.cli("init").returncode == 0
    assert path.stat().st_size > 0
    assert sqlite_workspace.cli("status").returncode == 0


# The child's own peak resident set: VmHWM belongs to the address space, which execve
# replaces. ru_maxrss does not: Linux keeps it across execve, so a big parent (an xdist
# worker) once made this child look 222 MB large.
PARSE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from relay_engine.contracts.config import ConfigError, load_config
    from relay_engine.contracts.job_file import JobFileError, load_job_file

    def peak_rss_mb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB

    started = time.perf_counter()
    try:
        load_job_file(Path(sys.argv[1]))
    except JobFileError as error:
        job_error = str(error)
    try:
        load_config(Path(sys.argv[2]))
    except ConfigError as error:
        config_error = str(error)
    print(json.dumps({
        "seconds": time.perf_counter() - started,
        "rss_mb": peak_rss_mb(),
        "job": job_error, "config": config_error,
    }))
    """
)


@pytest.mark.parametrize("text", [DOTTED_KEYS, NESTED], ids=["dotted keys", "nested brackets"])
def test_toml_bombs_are_refused_in_little_time_and_memory(tmp_path: Path, text: str) -> None:
    job = tmp_path / "bomb.toml"
    job.write_text(text, encoding="utf-8")
    (tmp_path / "relay.toml").write_text(text.replace("[job]", "[engine]"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", PARSE, str(job), str(tmp_path)],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["job"].startswith(f"{job}: line ")
    assert report["config"].startswith(f"{tmp_path / 'relay.toml'}: line ")
    assert report["rss_mb"] < 200, report
    assert report["seconds"] < 2, report


def test_the_caps_are_configurable(sqlite_workspace: Workspace) -> None:
    text = relay_toml() + "\n[inputs]\nmax_task_input_bytes = 1048576\n"
    (sqlite_workspace.path / "relay.toml").write_text(text, encoding="utf-8")
    args = _input_of(300 << 10)(sqlite_workspace)
    assert sqlite_workspace.cli(*args).returncode == 0
