"""The native supervisor built for real: compiled clean and cached once, a compiler that fails
or is missing falls back to the Python supervisor with the reason, and ``RELAY_SUPERVISOR``
chooses which supervisor an agent gets."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers import Workspace

from relay_engine.agents import native
from relay_engine.agents.runner import LaunchSpec, fork_server, launch

requires_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler here")


@pytest.fixture
def fresh_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache of its own, and this process's memo of the native supervisor forgotten before
    and after (the other tests of this worker find the host's again)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RELAY_CACHE_DIR", str(cache))
    native.forget()
    yield cache
    native.forget()


def true_spec(tmp_path: Path, name: str) -> LaunchSpec:
    true = shutil.which("true") or "/bin/true"
    return LaunchSpec(name, [true], tmp_path, dict(os.environ), 30, tmp_path / "art" / name)


def program(pid: int) -> str:
    return os.path.basename(os.readlink(f"/proc/{pid}/exe"))


@requires_cc
def test_the_source_compiles_without_a_warning(tmp_path: Path) -> None:
    argv = ["cc", *native.CFLAGS, "-o", str(tmp_path / "supervisor"), str(native.SOURCE)]
    built = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert built.returncode == 0 and built.stderr == "", built.stderr


@requires_cc
def test_a_build_is_cached_and_found_again_without_building(fresh_host: Path) -> None:
    first = native.find_or_build()
    assert first.binary is not None, first.reason
    assert Path(first.binary).parent == fresh_host
    stamp = os.stat(first.binary).st_mtime_ns
    assert native.find_or_build() == first
    assert os.stat(first.binary).st_mtime_ns == stamp
    assert os.listdir(fresh_host) == [Path(first.binary).name]  # no temporary left behind


@pytest.mark.parametrize(
    ("cc", "reason"),
    [
        ("/bin/false", "/bin/false failed (exit 1)"),
        ("relay-no-cc", "no C compiler: relay-no-cc not found"),
    ],
)
def test_a_compiler_that_fails_leaves_the_python_supervisor_with_the_reason(
    fresh_host: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    cc: str,
    reason: str,
) -> None:
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv(native.MODE_ENV, "native")
    caplog.set_level(logging.WARNING, logger=native.__name__)
    for i in range(2):
        process = launch(true_spec(tmp_path, f"fallback-{i}"))
        assert process.wait(20) == 0
        assert not process.own_child  # the fork server's
    assert native.native_supervisor() == native.Build(None, reason)
    warned = [r.getMessage() for r in caplog.records if r.name == native.__name__]
    assert warned == [f"no native supervisor ({reason}): agents run under the Python one"]


@pytest.mark.parametrize("mode", ["native", "fork", "exec"])
def test_relay_supervisor_chooses_the_supervisor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv(native.MODE_ENV, mode)
    script = "import time; time.sleep(30)"
    spec = true_spec(tmp_path, f"forced-{mode}")
    process = launch(LaunchSpec(**{**spec.__dict__, "argv": [sys.executable, "-c", script]}))
    try:
        parent = psutil.Process(process.pid).ppid()
        server = fork_server()
        assert parent == (server._proc.pid if mode == "fork" and server else os.getpid())
        assert program(process.pid).startswith("supervisor-" if mode == "native" else "python")
    finally:
        process.kill_now()
    assert process.wait(20) is not None


def test_doctor_names_the_python_fallback_and_why(
    sqlite_workspace: Workspace, tmp_path: Path
) -> None:
    env = {**os.environ, "CC": "/bin/false", "RELAY_CACHE_DIR": str(tmp_path / "cache")}
    argv = sqlite_workspace.cli_argv("doctor", "--json")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    report = json.loads(done.stdout)
    assert report["supervisor"] == "python fork server — /bin/false failed (exit 1)"
