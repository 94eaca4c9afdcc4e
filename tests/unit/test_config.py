"""relay.toml's checks that need no engine: a workspace nobody can work in is refused, and a
planner or an assessor runs read-only unless its agent says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_engine.contracts.config import AgentConfig, ConfigError, parse_config


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[engine]\ntick_seconds = 1\n", "no [[agents]] are defined"),
        ('[[agents]]\nid = "a"\nprovider = "sim"\nenabled = false\n', "every agent is disabled"),
    ],
)
def test_a_workspace_no_agent_can_work_in_is_refused(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(text, tmp_path / "relay.toml")
    assert str(refused.value) == (
        f"{tmp_path / 'relay.toml'}: agents: {said}, so no task could run: add an [[agents]] table "
        "(relay init writes an example) or set enabled = true"
    )


def test_planners_and_assessors_run_read_only_unless_their_agent_says_otherwise() -> None:
    plain = AgentConfig(id="a", provider="claude")
    assert plain.access == "workspace-write"
    assert plain.for_kind("plan").access == plain.for_kind("assess").access == "read-only"
    assert plain.for_kind("work") is plain and plain.for_kind("review") is plain
    chosen = AgentConfig(id="b", provider="claude", access="workspace-write")
    assert chosen.for_kind("plan") is chosen  # the operator set it: theirs to decide
