"""A stand-in agent CLI that replays what the real one printed (tests/fixtures/realcli).

Used where the real CLI cannot do the job here (it needs a login and the network): it is
a real process, printing the real CLI's recorded bytes on the same streams with the same
exit code. Configured by environment, because relay appends the CLI's own flags:

* ``REPLAY_CLI``: claude | codex | gemini (which help/version/status fixtures to answer)
* ``REPLAY_SCENARIO``: the fixture folder replayed for a task run; unset, the run succeeds
  (prints ``REPLAY_SUCCESS``)
* ``REPLAY_RESUME_SCENARIO``: the fixture folder replayed instead when relay asks to resume
  a session (``--resume ID``, codex ``exec resume ID``): "that session is gone"
* ``REPLAY_LINE_DELAY``: seconds between stdout lines (default 0)
* ``REPLAY_HANG``: after the output, sleep instead of exiting (codex waiting forever)
* ``REPLAY_LOGGED_IN``: a path; while that file exists, the run succeeds instead
  (prints ``REPLAY_SUCCESS``, a stream file, and exits 0): "the operator logged in"
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _emit(folder: Path, delay: float) -> int:
    meta = json.loads((folder / "meta.json").read_text())
    sys.stderr.write((folder / "stderr.txt").read_text())
    sys.stderr.flush()
    for line in (folder / "stdout.txt").read_text().splitlines(keepends=True):
        sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(delay)
    if os.environ.get("REPLAY_HANG"):
        time.sleep(3600)
    code = int(meta["exit_code"])
    return code if code >= 0 else 1


def _fixed(cli: str, argv: list[str]) -> str | None:
    """Scenario answering the CLI's read-only subcommands (what `relay doctor` runs)."""
    if "--version" in argv:
        return f"{cli}-version"
    if "--help" in argv:
        if cli == "codex":
            return "codex-exec-resume-help" if "resume" in argv else "codex-exec-help"
        return f"{cli}-help"
    if argv[:2] == ["auth", "status"]:
        return "claude-auth-status"
    if argv[:2] == ["login", "status"]:
        return "codex-login-status"
    return None


def main(argv: list[str]) -> int:
    cli = os.environ.get("REPLAY_CLI", "claude")
    fixed = _fixed(cli, argv)
    if fixed is not None:
        return _emit(FIXTURES / "realcli" / fixed, 0.0)
    delay = float(os.environ.get("REPLAY_LINE_DELAY", "0"))
    gone = os.environ.get("REPLAY_RESUME_SCENARIO")
    if gone and ("--resume" in argv or "resume" in argv[:-1]):  # the prompt comes last
        return _emit(FIXTURES / "realcli" / gone, delay)
    logged_in = os.environ.get("REPLAY_LOGGED_IN")
    scenario = os.environ.get("REPLAY_SCENARIO")
    if scenario is None or (logged_in and Path(logged_in).exists()):
        sys.stdout.write(Path(os.environ["REPLAY_SUCCESS"]).read_text())
        return 0
    return _emit(FIXTURES / "realcli" / scenario, delay)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
