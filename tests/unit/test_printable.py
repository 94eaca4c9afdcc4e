"""Words from outside relay lose what a terminal would obey, and nothing else."""

from __future__ import annotations

import pytest

from relay_engine.contracts.printable import strip_ansi, without_controls


@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("\x1b[1;31merror\x1b[0m: no", "error: no"),  # colours
        ("a\x1b[2J\x1b[Hb", "ab"),  # erase, cursor home
        ("\x1b]0;pwned\x07title", "title"),  # window title, ended by BEL
        ("\x1b]52;c;cm0gLXJm\x1b\\clip", "clip"),  # clipboard, ended by ST
        ("\x1b]8;;https://x.org\x1b\\link\x1b]8;;\x1b\\", "link"),  # a hyperlink keeps its words
        ("\x1bPq#0;2;0;0;0\x1b\\six", "six"),  # DCS (sixel)
        ("\x1bcreset", "reset"),  # two-character escape
        ("plain [bold] words", "plain [bold] words"),
    ],
)
def test_strip_ansi_removes_sequences_whole(text: str, stripped: str) -> None:
    assert strip_ansi(text) == stripped


def test_without_controls_keeps_the_printable_rest_and_newlines_only() -> None:
    """What a laid-out line may hold: nothing with a width goes, so the layout stays."""
    assert without_controls("a\x1b[2Jb\tc\x9bd\x07e\x00f\x7fg\ne") == "a[2Jbcdefg\ne"


def test_direction_controls_go_so_a_command_reads_as_it_will_run() -> None:
    """``\\u202e`` reverses what follows on a terminal that honours it: an ask for
    ``rm -rf /\\u202eboj`` would read as a harmless path."""
    assert without_controls("rm -rf /\u202eboj\u2066 \u200fx") == "rm -rf /boj x"


def test_clean_text_comes_back_as_it_is() -> None:
    """The console runs every drawn segment through it: no copy when there is nothing to do."""
    text = "an ordinary line · ünïcode ✔ and [brackets]"
    assert without_controls(text) is text and strip_ansi(text) is text
