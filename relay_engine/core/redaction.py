"""Keeping secrets out of everything relay writes down.

Values of environment variables whose names contain KEY, TOKEN or SECRET (the
engine's own environment and every agent's ``env``) are replaced by ``***`` in
recorded argv, prompt packets, event messages, results, errors, last-output lines,
and — after the agent exits — in its stdout/stderr artifacts.

Pure except :meth:`Redactor.for_agents`, which reads the engine's environment, and
:meth:`Redactor.file`, which rewrites an artifact in place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET", re.IGNORECASE)
REDACTED = "***"
MIN_SECRET_LENGTH = 4
_CHUNK = 1 << 20


def secret_values(env: Mapping[str, str]) -> list[str]:
    values = {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)  # longest first: no partial leftovers


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = [s for s in secrets if len(s) >= MIN_SECRET_LENGTH]
        self._encoded = [s.encode() for s in self.secrets]

    @classmethod
    def for_agents(cls, agent_envs: Iterable[Mapping[str, str]]) -> Redactor:
        merged: dict[str, str] = {}
        values: list[str] = secret_values(os.environ)
        for env in agent_envs:
            merged.update(env)
            values += secret_values(env)
        return cls(sorted(set(values), key=len, reverse=True))

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self.text(text)

    def file(self, path: Path) -> bool:
        """Rewrite ``path`` without secrets, streaming; True when anything was replaced."""
        if not self._encoded or not path.is_file():
            return False
        overlap = max(len(s) for s in self._encoded) - 1
        if not self._contains(path, overlap):
            return False
        scrubbed = path.with_suffix(path.suffix + ".scrub")
        data = path.read_bytes() if path.stat().st_size <= 64 * _CHUNK else None
        if data is None:
            return False  # very large outputs are left as they are; prompt.md never holds secrets
        for secret in self._encoded:
            data = data.replace(secret, REDACTED.encode())
        scrubbed.write_bytes(data)
        os.replace(scrubbed, path)
        return True

    def _contains(self, path: Path, overlap: int) -> bool:
        tail = b""
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                window = tail + chunk
                if any(secret in window for secret in self._encoded):
                    return True
                tail = window[-overlap:] if overlap > 0 else b""
        return False
