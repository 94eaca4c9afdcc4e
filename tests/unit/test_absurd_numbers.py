"""Whatever numbers an agent prints, its parser reads the run and every number it keeps is
one relay can compute with, show and store.

Every recorded CLI output (tests/fixtures/realcli and tests/fixtures/streams) is replayed
with each of its numbers replaced: by ``1e400`` and ``NaN`` (``json.loads`` hands over an
infinity and a NaN), by integers past 64 bits and past a float, and by digits past
Python's 4,300-digit limit in its plain-text lines. Before, ``int(inf)`` raised in the
token count, a float too large raised in the cost, and a reset at infinity or in the year
10**30 reached the limit's arithmetic; each stopped the engine.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest
from absurd_output import ABSURD, HUGE_DIGITS, with_numbers

from relay_engine.agents.adapters import get_adapter
from relay_engine.agents.adapters.base import AgentReport
from relay_engine.contracts.numbers import as_amount, as_count, epoch_seconds
from relay_engine.contracts.pricing import DEFAULT_PRICES
from relay_engine.core.limits import RESET_HORIZON_S
from relay_engine.store.read_model.executions import ExecutionView
from relay_tui.data.output import STDOUT_NAME
from relay_tui.data.progress import ProgressReader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


@cache
def readable() -> list[tuple[str, str, bytes, str, int]]:
    """(name, provider, stdout, stderr, exit code) of every recording a one-shot parser
    reads (not the ACP conversations, nor the CLIs' help pages)."""
    found = []
    for name, provider, stdout, stderr, code in recordings():
        try:
            replay(provider, stdout, stderr, code)
        except Exception:
            continue
        found.append((name, provider, stdout, stderr, code))
    return found


def recordings() -> Iterator[tuple[str, str, bytes, str, int]]:
    for folder in sorted((FIXTURES / "realcli").iterdir()):
        meta = json.loads((folder / "meta.json").read_text())
        stdout, stderr = (folder / "stdout.txt").read_bytes(), (folder / "stderr.txt").read_text()
        yield folder.name, folder.name.split("-")[0], stdout, stderr, meta["exit_code"]
    for stream in sorted((FIXTURES / "streams").glob("*.jsonl")):
        yield stream.name, stream.name.split("_")[0], stream.read_bytes(), "", 0


def replay(provider: str, stdout: bytes, stderr: str, code: int) -> AgentReport:
    parser = get_adapter(provider).parser()
    parser.feed(stdout, NOW)
    parser.notice_stderr(stderr)
    return parser.finish(code, stderr, NOW)


def usable(number: float | None) -> bool:
    return number is None or (math.isfinite(number) and 0 <= number < 2**63)


@pytest.mark.parametrize("absurd", ABSURD.values(), ids=ABSURD.keys())
def test_every_recorded_run_reads_with_absurd_numbers_and_keeps_only_usable_ones(
    absurd: str,
) -> None:
    for name, provider, stdout, stderr, code in readable():
        text = with_numbers(stdout.decode("utf-8", "replace"), absurd).encode()
        report = replay(provider, text, with_numbers(stderr, absurd), code)
        counts = (report.input_tokens, report.output_tokens, report.cached_tokens)
        assert all(usable(n) for n in (*counts, report.cost_usd)), (name, counts)
        reset = report.limit.reset_at if report.limit else None
        assert reset is None or reset - NOW.timestamp() <= RESET_HORIZON_S, (name, reset)
        for window in report.windows:
            assert usable(window.resets_at), (name, window)
            assert window.utilization is None or 0 <= window.utilization <= 10, (name, window)
    assert len(readable()) > 40  # the recordings were read, not skipped


def test_numbers_that_cannot_be_what_they_claim_are_unknown() -> None:
    assert [as_count(v) for v in (12, 12.0, -1, math.inf, math.nan, 10**30, True, "12")] == [
        12, 12, None, None, None, None, None, None]  # fmt: skip
    assert [as_amount(v) for v in (0.25, 3, -0.5, math.inf, 10**400, False)] == [
        0.25, 3.0, None, None, None, None]  # fmt: skip
    assert epoch_seconds(1764600000) == epoch_seconds(1764600000000) == 1764600000.0
    assert epoch_seconds("1764600000") == 1764600000.0
    assert epoch_seconds("2026-12-01T15:00:00Z") == NOW.timestamp()
    assert [epoch_seconds(v) for v in (HUGE_DIGITS, "²", math.inf, -5, 1e300, "soon")] == [None] * 6


def test_the_consoles_live_token_count_skips_counts_that_cannot_be_counts(
    tmp_path: Path,
) -> None:
    """The console reads a running agent's stream as it is written: a count of ``1e400``
    or ``"lots"`` raised in its reader before."""
    lines = [
        {"type": "turn.completed", "usage": {"input_tokens": "INF", "output_tokens": 5}},
        {"type": "assistant", "message": {"usage": {"input_tokens": "lots", "output_tokens": 7}}},
        {"type": "turn.completed", "usage": {"input_tokens": 100, "output_tokens": 2}},
    ]
    (tmp_path / STDOUT_NAME).write_text(
        "".join(json.dumps(line).replace('"INF"', "1e400") + "\n" for line in lines)
    )
    run = ExecutionView(
        id="e1", job_id="j", task_key="j/t", plan_id=None, agent="codex", provider="codex",
        attempt=1, started_at=0.0, ended_at=None, outcome=None, exit_code=None, error=None,
        artifact_dir=str(tmp_path), last_output=None, model="gpt-5-codex",
    )  # fmt: skip

    progress = ProgressReader(DEFAULT_PRICES).read([run])["e1"]

    assert (progress.input_tokens, progress.output_tokens) == (100, 14)
