"""The real-CLI tier's fixtures: the pinned CLIs (npm ci, cached) and the model stub."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from clis import install
from modelstub import ModelStub


@pytest.fixture(scope="session")
def cli_bin() -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the real-CLI tier installs the agent CLIs with it")
    return install(npm)


@pytest.fixture
def model_stub() -> Iterator[ModelStub]:
    """A scripted model server on 127.0.0.1 (``model_stub.script([...])`` before the run)."""
    with ModelStub() as stub:
        yield stub
