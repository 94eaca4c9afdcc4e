"""Where the native supervisor is looked for, and a cached one found without building
(this tier starts no process: a compile here would fail the test)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from relay_engine.agents import native

SOURCE = native.SOURCE.read_bytes()


def test_the_cache_folder_is_relays_then_xdgs_then_the_homes() -> None:
    home = {"HOME": "/home/op"}
    assert native.cache_dir(home) == Path("/home/op/.cache/relay")
    assert native.cache_dir({**home, "XDG_CACHE_HOME": "/x"}) == Path("/x/relay")
    chosen = {**home, "XDG_CACHE_HOME": "/x", "RELAY_CACHE_DIR": "/r"}
    assert native.cache_dir(chosen) == Path("/r")


def test_a_new_source_compiler_or_flag_is_a_new_binary() -> None:
    name = native.binary_name(SOURCE, ["cc", *native.CFLAGS])
    assert name.startswith("supervisor-")
    assert native.binary_name(SOURCE, ["cc", *native.CFLAGS]) == name
    assert native.binary_name(SOURCE + b"\n", ["cc", *native.CFLAGS]) != name
    assert native.binary_name(SOURCE, ["clang", *native.CFLAGS]) != name
    assert native.binary_name(SOURCE, ["cc", "-O0"]) != name


def test_the_compiler_is_cc_unless_CC_says_otherwise() -> None:  # noqa: N802 - the variable
    assert native.compiler({}) == ["cc"]
    assert native.compiler({"CC": ""}) == ["cc"]
    assert native.compiler({"CC": "ccache gcc"}) == ["ccache", "gcc"]


def test_a_cached_binary_is_used_as_it_is(tmp_path: Path) -> None:
    env = {"RELAY_CACHE_DIR": str(tmp_path), "CC": "gcc"}
    cached = tmp_path / native.binary_name(SOURCE, ["gcc", *native.CFLAGS])
    cached.write_bytes(b"#!/bin/sh\n")
    cached.chmod(0o755)
    assert native.find_or_build(env) == native.Build(str(cached))


def test_a_binary_planted_in_a_shared_temporary_folder_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the cache folder cannot be had, the binary goes to a folder of this user's own
    under the temporary directory: one that others may write to is never used."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    env = {"RELAY_CACHE_DIR": str(blocker / "relay"), "CC": "gcc"}
    shared = native.private_tmp_dir()
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    planted = shared / native.binary_name(SOURCE, ["gcc", *native.CFLAGS])
    planted.write_bytes(b"#!/bin/sh\n")
    planted.chmod(0o755)
    build = native.find_or_build(env)
    assert build.binary is None
    assert build.reason.startswith(f"nowhere to keep it: cannot create {blocker / 'relay'}: ")
    assert build.reason.endswith(f"{shared} is not a private folder of this user")
    shared.chmod(0o700)
    assert native.find_or_build(env) == native.Build(str(planted))


@pytest.mark.parametrize(
    ("asked", "chosen"),
    [(None, "native"), ("native", "native"), ("fork", "fork"), ("exec", "exec"), ("x", "native")],
)
def test_relay_supervisor_chooses_the_supervisor(asked: str | None, chosen: str) -> None:
    env = {} if asked is None else {native.MODE_ENV: asked}
    assert native.mode(env) == chosen


def test_a_forced_python_supervisor_is_described_without_looking_for_the_native_one() -> None:
    assert (
        native.describe({native.MODE_ENV: "fork"}) == "python fork server (RELAY_SUPERVISOR=fork)"
    )
    assert native.describe({native.MODE_ENV: "exec"}) == "python script (RELAY_SUPERVISOR=exec)"
