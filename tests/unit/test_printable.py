"""Words from outside relay lose what a terminal would obey, and nothing else."""

from __future__ import annotations

import pytest

from relay_engine.contracts.printable import printable, strip_ansi, without_controls


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


def test_printable_keeps_lines_and_tabs_and_drops_every_other_control() -> None:
    assert printable("a\tb\nc\x07d\x00e\x08f\x7fg\x9b31mh") == "a\tb\ncdefg31mh"
    assert printable("\x1b[31mred\x1b[0m\r\n") == "red\n"


def test_without_controls_keeps_the_printable_rest_and_newlines_only() -> None:
    """What a drawn line may hold: the layout is already made, so nothing with a width goes."""
    assert without_controls("a\x1b[2Jb\tc\x9bd\ne") == "a[2Jbcd\ne"


def test_clean_text_comes_back_as_it_is() -> None:
    """The console runs every drawn line through it: no copy when there is nothing to do."""
    text = "an ordinary line · ünïcode ✔ and [brackets]"
    assert printable(text) is text and without_controls(text) is text and strip_ansi(text) is text
