"""Which events a destination wants, and how destinations are told apart and named."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_engine.loop.notify import Destination, wanted


@pytest.mark.parametrize(
    ("kind", "patterns", "expected"),
    [
        ("task.failed", ["task.failed"], True),
        ("task.failed", ["task.*"], True),
        ("task.succeeded", ["task.failed", "job.finished"], False),
        ("notify.failed", ["*"], False),
        ("job.finished", ["*"], True),
    ],
)
def test_which_events_are_notified(kind: str, patterns: list[str], expected: bool) -> None:
    assert wanted(kind, patterns) is expected


def test_destinations_have_stable_distinct_cursors_and_safe_labels(tmp_path: Path) -> None:
    hook = Destination("webhook", "https://hooks.example.com/services/T000/SECRET")
    assert hook.key == Destination("webhook", "https://hooks.example.com/services/T000/SECRET").key
    assert hook.key != Destination("webhook", "https://hooks.example.com/other").key
    assert hook.label == "https://hooks.example.com"
    assert Destination("command", ("notify-send", "relay")).label == "notify-send"
