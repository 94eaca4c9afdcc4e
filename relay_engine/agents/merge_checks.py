"""The repository's merge checks, run after a merge_prep agent: `python -I -m
relay_engine.agents.merge_checks --record FILE --log FILE --check CMD ... -- AGENT ARGV`.

It sits between the sandbox and the agent's CLI, so the checks run with exactly the agent's
view of the machine (what the agent could have run itself, nothing more), inside the run's
timeout, and die with it on cancel. The agent keeps the stdin and stdout relay talks to and
parses; the checks write to the log file instead. Once the agent exits 0, each check runs in
turn (no shell: each line split as a shell would) until one fails; the record says what each
did, and :func:`relay_engine.core.merge_prep.judge_checks` reads it. The exit status is the
agent's own.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from relay_engine.core.merge_prep import OUTPUT_TAIL_CHARS, CheckRun, record_json


def run_check(command: str, log: Path) -> CheckRun:
    with log.open("ab") as out:
        out.write(f"$ {command}\n".encode())
        out.flush()
        try:
            done = subprocess.run(
                shlex.split(command), stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=False
            )
        except OSError as error:
            return CheckRun(command, None, error=str(error))
    return CheckRun(command, done.returncode, tail=_tail(log))


def _tail(log: Path) -> str:
    with log.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(max(0, size - OUTPUT_TAIL_CHARS * 2))
        return handle.read().decode("utf-8", errors="replace")[-OUTPUT_TAIL_CHARS:]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(prog="relay-merge-checks")
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--check", action="append", default=[])
    options = parser.parse_args(args[:split])
    agent = args[split + 1 :]
    if not agent:
        parser.error("the agent's argv goes after --")
    code = subprocess.call(agent)  # stdin, stdout and stderr are the agent's: inherited
    runs: list[CheckRun] = []
    if code == 0:
        for command in options.check:
            runs.append(run_check(command, options.log))
            if runs[-1].exit_code != 0:
                break
    options.record.write_text(record_json(runs, code), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
