"""Console tests: fixed timezone, frozen clock and sample databases."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from console_helpers import attached_app

from relay_tui.app import RelayApp
from relay_tui.demo.sample import write_empty, write_sample

os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture
def sample_app(tmp_path: Path) -> RelayApp:
    return attached_app(tmp_path, write_sample(tmp_path))


@pytest.fixture
def empty_app(tmp_path: Path) -> RelayApp:
    return attached_app(tmp_path, write_empty(tmp_path))
