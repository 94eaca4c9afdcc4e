"""Size and shape checks that run before any parser sees an operator's or planner's input.

``tomllib`` needs tens of seconds and gigabytes for a 100 KB file of one key dotted 50,000
times, and recurses until ``RecursionError`` on 100,000 nested brackets; ``json`` recurses
too. A job file is a few tables a few levels deep, so relay refuses anything bigger or
deeper before parsing, with the file, the line and the limit. The scans are linear: a
regular expression finds the few characters that matter and skips over the rest in C.

Pure except :func:`read_capped`, which reads the file it is given, at most the cap.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_NESTING = 32  # arrays and inline tables inside each other
MAX_KEY_PARTS = 32  # a.b.c… in one key or one [table.header]
DEFAULT_MAX_FILE_BYTES = 1 << 20
DEFAULT_MAX_TASK_INPUT_BYTES = 256 << 10

_TOML_TOKEN = re.compile(r"\"\"\"|'''|[\"'#\[\]{}.=,\n]")
_BASIC_STRING_END = re.compile(r'(?:[^"\\\n]|\\.)*"')
_JSON_TOKEN = re.compile(r'["\[\]{}]')
_JSON_STRING_END = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)


class InputTooLarge(ValueError):
    """Input over a size or nesting cap; the message says where and which limit."""


def size_text(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size / 1024:.0f} KiB" if size >= 1024 else f"{size} bytes"


def read_capped(path: Path, max_bytes: int, setting: str = "max_file_bytes") -> str:
    """A text file's content, refused unread when it is over ``max_bytes``."""
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        size = max(path.stat().st_size, len(data))
        raise InputTooLarge(
            f"file is {size_text(size)}, over the {size_text(max_bytes)} limit "
            f"([inputs] {setting} in relay.toml)"
        )
    return data.decode("utf-8")


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _too_deep(text: str, pos: int, what: str) -> InputTooLarge:
    return InputTooLarge(f"line {_line(text, pos)}: {what}; refused before parsing")


def _skip_string(text: str, token: str, pos: int) -> int:
    """Position after the string that ``token`` opened at ``pos`` (end of text if unclosed)."""
    if token in ('"""', "'''"):
        end = text.find(token, pos)
        if end < 0:
            return len(text)
        end += 3
        for _ in range(2):  # up to two quotes may end the string just before its delimiter
            if text.startswith(token[0], end):
                end += 1
        return end
    if token == "'":
        end = text.find("'", pos)
        return len(text) if end < 0 else end + 1
    match = _BASIC_STRING_END.match(text, pos)
    if match:
        return match.end()
    newline = text.find("\n", pos)  # unclosed: the parser will say so; scan on
    return len(text) if newline < 0 else newline


class _TomlShape:
    """Just enough of TOML's grammar to tell keys from values and count depth."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.stack: list[str] = []  # "[" and "{" of arrays and inline tables
        self.in_key = True  # at a key (line start, after "{" or "," in an inline table)
        self.in_header = False
        self.parts = 1

    def scan(self) -> None:
        pos = 0
        while match := _TOML_TOKEN.search(self.text, pos):
            token, pos = match.group(), match.end()
            if token in ('"', "'", '"""', "'''"):
                pos = _skip_string(self.text, token, pos)
            elif token == "#":
                newline = self.text.find("\n", pos)
                pos = len(self.text) if newline < 0 else newline
            else:
                self._structural(token, match.start())

    def _structural(self, token: str, at: int) -> None:
        if token == "\n":
            if not self.stack:
                self.in_key, self.in_header, self.parts = True, False, 1
        elif token == ".":
            if self.in_key or self.in_header:
                self.parts += 1
                if self.parts > MAX_KEY_PARTS:
                    raise _too_deep(
                        self.text, at, f"a key of more than {MAX_KEY_PARTS} dotted parts"
                    )
        elif token == "=":
            self.in_key = False
        elif token == ",":
            if self.stack and self.stack[-1] == "{":
                self.in_key, self.parts = True, 1
        elif token in "[{":
            self._open(token, at)
        elif self.stack and self.stack[-1] == {"]": "[", "}": "{"}[token]:
            self.stack.pop()
            self.in_key = False
        elif token == "]" and self.in_header:
            self.in_key = False

    def _open(self, token: str, at: int) -> None:
        if token == "[" and not self.stack and (self.in_key or self.in_header):
            self.in_header, self.in_key = True, False  # a [table] or [[array]] header
            return
        self.stack.append(token)
        if len(self.stack) > MAX_NESTING:
            raise _too_deep(
                self.text, at, f"arrays and inline tables nested more than {MAX_NESTING} deep"
            )
        if token == "{":
            self.in_key, self.parts = True, 1


def check_toml_shape(text: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
    """Refuse TOML too big or too deep to hand to ``tomllib``; valid TOML passes as is."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InputTooLarge(
            f"{size_text(size)}, over the {size_text(max_bytes)} limit "
            "([inputs] max_file_bytes in relay.toml)"
        )
    _TomlShape(text).scan()


def check_json_shape(text: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
    """The same for JSON, whose parser recurses once per level of nesting."""
    if len(text) > max_bytes:
        raise InputTooLarge(f"over the {size_text(max_bytes)} limit")
    depth, pos = 0, 0
    while match := _JSON_TOKEN.search(text, pos):
        token, pos = match.group(), match.end()
        if token == '"':
            end = _JSON_STRING_END.match(text, pos)
            pos = end.end() if end else len(text)
        elif token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise _too_deep(
                    text, match.start(), f"arrays and objects nested more than {MAX_NESTING} deep"
                )
        else:
            depth = max(depth - 1, 0)
