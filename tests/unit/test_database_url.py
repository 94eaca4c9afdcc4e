"""Every command, and what it says when the database fails, means the same database."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_engine.store.db import database_url, location


def test_db_flag_then_relay_db_then_the_workspace_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RELAY_DB", raising=False)
    assert database_url(tmp_path) == f"sqlite:///{tmp_path.resolve()}/.relay/relay.db"
    monkeypatch.setenv("RELAY_DB", "postgresql://relay@db.example:5433/fleet")
    assert location(database_url(tmp_path)) == "db.example:5433/fleet"  # not the workspace's file
    assert database_url(tmp_path, "sqlite:///x.db") == "sqlite:///x.db"
