"""Words from outside relay, made safe to put on the operator's terminal.

An agent's error, an ask's tool input, a CLI's fix or a line of a diff can hold terminal
control sequences: colours a CLI printed, but also ``ESC [2J`` (clear the screen), ``ESC ]0;``
(set the window title) or ``ESC ]52;`` (write the clipboard). Printed as they are, the
terminal obeys them: the console's panes are wiped, and whatever ran in a worktree could
write to the operator's clipboard. Direction overrides can make a command an agent asks to
run read as another one.

Text is stored as it came and loses these where it leaves: the console's line filter
(:class:`relay_tui.render.terminal.ControlCharacters`) and the CLI's render hook
(``relay_engine/cli/output.py``) put every drawn segment through :func:`printable_segments`.
Agents' output lines, progress and failure sentences lose whole escape sequences with
:func:`strip_ansi` when they are read.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.segment import Segment

ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: title, clipboard, links (BEL or ST ends it)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # the rest: two-character escapes (reset, charset)
)
"""An escape sequence whole: removing only its ESC would leave ``[31m`` in the text."""

BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Direction marks, embeddings, overrides and isolates: on a terminal that honours them an
ask to run ``rm -rf /\\u202eboj`` reads as another command, and the operator decides on
what it reads."""

CONTROL = re.compile(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{BIDI}]")
"""C0 and C1 control characters (the C1 range holds a one-character CSI, ``\\x9b``, some
terminals obey) and the direction controls; not newline, which ends a printed line. None
of them has a width."""


def strip_ansi(text: str) -> str:
    """Text without its escape sequences (the text between them stays)."""
    return ANSI.sub("", text) if "\x1b" in text else text


def without_controls(text: str) -> str:
    """Text laid out for a terminal, less what the terminal would obey: since none of it has
    a width, the layout stays as it was, and an escape sequence's printable rest (``[2J``)
    stays visible. The same object comes back when there was nothing to remove, so a
    caller can tell cheaply."""
    return CONTROL.sub("", text) if CONTROL.search(text) else text


def printable_segments(segments: Iterable[Segment]) -> list[Segment]:
    """Laid-out segments, their text :func:`without_controls`; control segments (Rich's own
    cursor moves) and clean ones pass as they are."""
    kept = []
    for segment in segments:
        text = segment.text
        shown = text if segment.control else without_controls(text)
        kept.append(segment if shown is text else Segment(shown, segment.style))
    return kept
