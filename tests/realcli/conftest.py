"""The real-CLI tier's fixtures: the pinned CLIs (npm ci, cached) and the model stub."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from clis import install, install_latest
from modelstub import ModelStub


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--realcli-latest",
        action="store_true",
        help="run the real-CLI tier against the newest published CLIs (npm @latest, installed "
        "in a cache folder of their own) instead of the pinned ones",
    )


@pytest.fixture(scope="session")
def realcli_latest(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--realcli-latest", default=False))


@pytest.fixture(scope="session")
def cli_bin(realcli_latest: bool) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the real-CLI tier installs the agent CLIs with it")
    return install_latest(npm) if realcli_latest else install(npm)


@pytest.fixture
def model_stub() -> Iterator[ModelStub]:
    """A scripted model server on 127.0.0.1 (``model_stub.script([...])`` before the run)."""
    with ModelStub() as stub:
        yield stub
