"""Chaos: engines killed and paused at random, a full disk, a paused lock holder.

Every test here is ``slow``: the fast loop (``pytest -m "not slow"``) leaves the tier out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.slow)
