"""Words from outside relay, made safe to put on the operator's terminal.

An agent's error, an ask's tool input, a CLI's fix or a line of a diff can hold terminal
control sequences: colours a CLI printed, but also ``ESC [2J`` (clear the screen), ``ESC ]0;``
(set the window title) or ``ESC ]52;`` (write the clipboard). Printed as they are, the
terminal obeys them: the console's panes are wiped, and whatever ran in a worktree could
write to the operator's clipboard. The console removes every control character from what it
draws (:class:`relay_tui.render.terminal.ControlCharacters`); the CLI prints such text
through :func:`printable`; agents' output lines and progress lose their escapes with
:func:`strip_ansi` when they are read.

Pure: no I/O.
"""

from __future__ import annotations

import re

ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: title, clipboard, links (BEL or ST ends it)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # the rest: two-character escapes (reset, charset)
)
"""An escape sequence whole: removing only its ESC would leave ``[31m`` in the text."""

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters but newline and tab, which text may hold and a terminal
draws harmlessly. The C1 range holds a one-character CSI (``\\x9b``) some terminals obey."""

_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LAID_OUT = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # a tab moves a terminal's cursor


def strip_ansi(text: str) -> str:
    """Text without its escape sequences (the text between them stays)."""
    return ANSI.sub("", text) if "\x1b" in text else text


def printable(text: str) -> str:
    """Text a terminal draws as written: no escape sequence, no control character but
    newline and tab."""
    if not _ANY_CONTROL.search(text):
        return text
    return CONTROL.sub("", strip_ansi(text))


def without_controls(text: str) -> str:
    """Every control character but newline removed, and nothing else: what text already
    laid out on a screen may hold. None has a width, so the layout stays as it was; the
    same text comes back when there was nothing to remove."""
    return _LAID_OUT.sub("", text) if _LAID_OUT.search(text) else text
