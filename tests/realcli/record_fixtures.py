"""Record what the real agent CLIs print offline and logged out, as test fixtures.

Run by hand after ``npm ci`` in this folder (or let the real-CLI tier install them):

    python tests/realcli/record_fixtures.py [--only NAME] [--cli-dir DIR]

Each scenario runs one CLI with the argv relay builds (or a deliberately broken one), with
HOME pointed at an empty temporary folder so no login on this machine leaks in, in a git
repository or a plain folder. stdout, stderr, the exit code and how long it took go to
``tests/fixtures/realcli/<scenario>/``, with machine paths and wall-clock timestamps
replaced by placeholders. Scenarios that would loop forever (codex waiting for the
network) are stopped by the recorder after ``stop_after`` seconds; meta.json says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "realcli"
PROMPT = "Reply with the single word: hi"
GONE_SESSION = "3f2a9c1e-4b7d-4e2a-9c3b-8d1e5f6a7b90"  # resumed, but never created
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d[:-]\d\d[:-]\d\d(?:[.-]\d+)?Z?")


@dataclass(frozen=True)
class Scenario:
    name: str
    argv: tuple[str, ...]
    git: bool = True
    env: dict[str, str] = field(default_factory=dict)
    stop_after: float = 60.0
    note: str = ""


SCENARIOS = (
    Scenario(
        "claude-not-logged-in",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits"),
    ),
    Scenario(
        "claude-not-logged-in-plain-dir",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits"),
        git=False,
    ),
    Scenario(
        "claude-api-key-offline",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits"),
        env={"ANTHROPIC_API_KEY": "sk-ant-api03-relay-fixture-not-a-key"},
        stop_after=400.0,
        note="claude retries the API 10 times (about 3 minutes) and then gives up itself",
    ),
    Scenario(
        "claude-bypass-as-root",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "bypassPermissions"),
        note="recorded as root: claude refuses to skip permissions for root",
    ),
    Scenario("claude-unknown-flag", ("claude", "-p", PROMPT, "--relay-bogus-flag")),
    Scenario(
        "codex-offline",
        ("codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
         PROMPT),
        stop_after=75.0,
        note="codex never gives up waiting for the network: stopped by the recorder",
    ),
    Scenario(
        "codex-offline-api-key",
        ("codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
         PROMPT),
        git=False,
        env={"CODEX_API_KEY": "sk-relay-fixture-not-a-key"},
        stop_after=20.0,
        note="stopped by the recorder",
    ),
    Scenario(
        "codex-not-a-git-repo",
        ("codex", "exec", "--json", "--sandbox", "workspace-write", PROMPT),
        git=False,
    ),
    Scenario("codex-unknown-flag", ("codex", "exec", "--json", "--full-auto", PROMPT)),
    Scenario(
        "gemini-not-logged-in",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "auto_edit",
         "--skip-trust"),
    ),
    Scenario(
        "gemini-untrusted-folder",
        ("gemini", "-p", PROMPT, "--output-format", "json"),
        env={"GEMINI_API_KEY": "relay-fixture-not-a-key"},
    ),
    Scenario(
        "gemini-api-key-offline",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "auto_edit",
         "--skip-trust"),
        env={"GEMINI_API_KEY": "relay-fixture-not-a-key"},
        stop_after=60.0,
        note="gemini retries with back-off for minutes: stopped by the recorder",
    ),
    Scenario("gemini-unknown-flag", ("gemini", "-p", PROMPT, "--relay-bogus-flag")),
    Scenario(
        "gemini-bad-choice",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "everything"),
    ),
    Scenario(
        "claude-resume-gone",
        ("claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
         "--permission-mode", "acceptEdits", "--resume", GONE_SESSION),
        env={"ANTHROPIC_API_KEY": "sk-ant-api03-relay-fixture-not-a-key"},
        note="a session id this HOME never saw: what a resume after the session was lost prints",
    ),
    Scenario(
        "codex-resume-gone",
        ("codex", "exec", "--json", "--sandbox", "workspace-write", "resume", GONE_SESSION,
         PROMPT),
        env={"CODEX_API_KEY": "sk-relay-fixture-not-a-key"},
        note="a thread id this HOME never saw",
    ),
    Scenario(
        "gemini-resume-gone",
        ("gemini", "-p", PROMPT, "--output-format", "json", "--approval-mode", "auto_edit",
         "--skip-trust", "--resume", GONE_SESSION),
        env={"GEMINI_API_KEY": "relay-fixture-not-a-key"},
        note="a session id this project never saw",
    ),
    Scenario("claude-auth-status", ("claude", "auth", "status")),
    Scenario("codex-login-status", ("codex", "login", "status")),
    Scenario("claude-help", ("claude", "--help")),
    Scenario("codex-exec-help", ("codex", "exec", "--help")),
    Scenario("codex-exec-resume-help", ("codex", "exec", "resume", "--help")),
    Scenario("gemini-help", ("gemini", "--help")),
    Scenario("claude-version", ("claude", "--version")),
    Scenario("codex-version", ("codex", "--version")),
    Scenario("gemini-version", ("gemini", "--version")),
)  # fmt: skip


def _folder(root: Path, git: bool) -> Path:
    work = root / ("repo" if git else "plain")
    work.mkdir()
    (work / "README.md").write_text("fixture\n")
    if git:
        for args in (
            ["init", "-q", "-b", "main"],
            ["add", "."],
            [
                "-c",
                "user.name=relay",
                "-c",
                "user.email=relay@example.invalid",
                "commit",
                "-qm",
                "x",
            ],
        ):
            subprocess.run(["git", *args], cwd=work, check=True)
    return work


def _scrub(text: str, replacements: dict[str, str]) -> str:
    for value, placeholder in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(value, placeholder)
    return _ISO_TIME.sub("2026-01-01T00:00:00.000Z", text)


def record(scenario: Scenario, cli_dir: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="relay-rec-") as tmp:
        root = Path(tmp).resolve()
        home = root / "home"
        home.mkdir()
        work = _folder(root, scenario.git)
        env = {
            "PATH": f"{cli_dir / 'node_modules' / '.bin'}:{os.environ.get('PATH', '')}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            **scenario.env,
        }
        started = time.monotonic()
        proc = subprocess.Popen(
            scenario.argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        stopped = False
        try:
            out, err = proc.communicate(timeout=scenario.stop_after)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            stopped = True
        seconds = time.monotonic() - started
        replacements = {
            str(home): "$HOME",
            str(work): "$CWD",
            str(root): "$TMP",
            str(cli_dir): "$CLI_DIR",
            str(Path.home()): "$REAL_HOME",
            **{value: f"${name}" for name, value in scenario.env.items()},
        }
        target = FIXTURES / scenario.name
        target.mkdir(parents=True, exist_ok=True)
        for name, data in (("stdout.txt", out), ("stderr.txt", err)):
            text = data.decode("utf-8", errors="replace")
            (target / name).write_text(_scrub(text, replacements), encoding="utf-8")
        meta = {
            "argv": list(scenario.argv),
            "git_repo": scenario.git,
            "env": sorted(scenario.env),
            "exit_code": proc.returncode,
            "seconds": round(seconds, 1),
            "stopped_by_recorder": stopped,
            "note": scenario.note,
        }
        (target / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return meta


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="scenario name (repeatable)")
    parser.add_argument("--cli-dir", type=Path, default=HERE)
    args = parser.parse_args()
    cli_dir = args.cli_dir.resolve()
    if not shutil.which("claude", path=str(cli_dir / "node_modules" / ".bin")):
        print(f"no CLIs under {cli_dir}/node_modules: run `npm ci` there first", file=sys.stderr)
        return 1
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    for scenario in chosen:
        meta = record(scenario, cli_dir)
        print(f"{scenario.name}: exit {meta['exit_code']} in {meta['seconds']}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
