"""A scriptable stand-in for agent CLIs (Claude Code, Codex, Gemini CLI).

Spawned hundreds of times by tests and demos, so it imports only the standard library and
nothing else from relay_engine. Behaviour is scripted by the JSON object in RELAY_SIM_SCRIPT:
duration, durations_by_attempt {"2": 0.5}, lines, exit_code, fail_attempts, output_bytes, binary, spawn_grandchild,
grandchild_pid_file, spawn_daemon ("group" | "setsid"), daemon_pid_file, ignore_sigterm, result, results_by_attempt, results_by_round,
rate_limit {message, attempts, exit_code, until_epoch, format}, session_id, format, model, cost_usd,
write_files {relative path: content} (written into the working directory, as an agent would),
record_cwd PATH (append a JSON line {cwd, files, round, attempt} there: what the agent saw),
emit [JSON objects] (printed as stream lines right after the start, e.g. a claude
rate_limit_event),
asks [{tool, input, writes}] (claude format with --permission-prompt-tool stdio: ask for each
tool use on stdout, wait for the answer on stdin, and write ``writes`` when it is allowed;
``tool: AskUserQuestion`` asks a question and writes the answers to ``answers.json``),
troubleshooter {a script for the troubleshooter of this task, e.g. its verdict as result},
run_log (a file to append ``start``/``end`` lines to: the run's execution id, pid and
wall-clock time, the end also on SIGTERM, so a test can tell whether two runs overlapped),
resolve_conflicts ("ours" | "theirs": settle every conflicted file of a merge in progress, as a
rebase agent would), review {changes_on_rounds, findings, summary} with review_round (answer a
final review: "changes" with the findings on the listed rounds, "approve" otherwise).
Other env: RELAY_ATTEMPT, RELAY_RESULT_FILE, RELAY_TASK, RELAY_PLAN_ROUND.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

FORMATS = ("plain", "claude", "codex", "gemini")
DEFAULT_MODELS = {
    "plain": "sim",
    "claude": "claude-sonnet-4-5",
    "codex": "gpt-5-codex",
    "gemini": "gemini-2.5-pro",
}
DEFAULTS: dict[str, Any] = {"duration": 1.0, "lines": 5, "exit_code": 0, "fail_attempts": 0}
_CHUNK = 1 << 20


class Sim:
    """One run: the resolved script plus the emit functions for the chosen output format."""

    def __init__(self, script: dict[str, Any], fmt: str, session_id: str, prompt: str):
        self.script = script
        self.fmt = fmt
        self.session_id = session_id
        self.prompt = prompt
        self.task = os.environ.get("RELAY_TASK", "task")
        self.attempt = _env_int("RELAY_ATTEMPT", 1)
        self.round = os.environ.get("RELAY_PLAN_ROUND")
        self.model = str(script.get("model") or DEFAULT_MODELS[fmt])
        self.started = time.time()
        self.lines_done = 0

    # -- output helpers ---------------------------------------------------------------
    def out(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def err(self, text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def jsonl(self, obj: dict[str, Any]) -> None:
        self.out(json.dumps(obj))

    def usage(self) -> tuple[int, int]:
        return 100 + len(self.prompt) // 4, 20 * max(1, self.lines_done)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self.fmt == "claude":
            self.jsonl(
                {
                    "type": "system",
                    "subtype": "init",
                    "session_id": self.session_id,
                    "cwd": os.getcwd(),
                    "tools": ["Bash", "Edit", "Read", "Write"],
                    "model": self.model,
                    "permissionMode": "bypassPermissions",
                }
            )
        elif self.fmt == "codex":
            self.jsonl({"type": "thread.started", "thread_id": self.session_id})
            self.jsonl({"type": "turn.started"})

    def progress(self, text: str) -> None:
        if self.fmt == "claude":
            self.jsonl(
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "model": self.model,
                        "content": [{"type": "text", "text": text}],
                    },
                    "session_id": self.session_id,
                }
            )
        elif self.fmt == "codex":
            item = {"id": f"item_{self.lines_done}", "type": "agent_message", "text": text}
            self.jsonl({"type": "item.completed", "item": item})
        elif self.fmt == "gemini":
            self.err(text)
        else:
            self.out(text)
        self.lines_done += 1

    def finish(self, summary_text: str, is_error: bool) -> None:
        tokens_in, tokens_out = self.usage()
        if self.fmt == "claude":
            self.jsonl(
                {
                    "type": "result",
                    "subtype": "error_during_execution" if is_error else "success",
                    "is_error": is_error,
                    "result": summary_text,
                    "session_id": self.session_id,
                    "total_cost_usd": float(self.script.get("cost_usd", 0.0123)),
                    "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                    "duration_ms": int((time.time() - self.started) * 1000),
                    "num_turns": max(1, self.lines_done),
                }
            )
        elif self.fmt == "codex":
            if is_error:
                self.codex_error(summary_text)
            else:
                usage = {
                    "input_tokens": tokens_in,
                    "cached_input_tokens": 0,
                    "output_tokens": tokens_out,
                }
                self.jsonl({"type": "turn.completed", "usage": usage})
        elif self.fmt == "gemini":
            if is_error:
                self.gemini_error("Error", summary_text, 1)
            else:
                tokens = {"prompt": tokens_in, "candidates": tokens_out}
                tokens["total"] = tokens_in + tokens_out
                stats = {"models": {self.model: {"tokens": tokens}}}
                self.out(json.dumps({"response": summary_text, "stats": stats}))
        else:
            (self.err if is_error else self.out)(summary_text)

    def codex_error(self, message: str) -> None:
        self.jsonl({"type": "error", "message": message})
        self.jsonl({"type": "turn.failed", "error": {"message": message}})

    def gemini_error(self, kind: str, message: str, code: int) -> None:
        self.out(json.dumps({"error": {"type": kind, "message": message, "code": code}}))

    def rate_limited(self, message: str) -> None:
        """Report a usage limit the way each real CLI does, so adapters can be tested on it."""
        if self.fmt == "claude":
            # Claude Code reports limits as a "success" result flagged is_error.
            self.jsonl(
                {
                    "type": "result",
                    "subtype": "success",
                    "is_error": True,
                    "result": message,
                    "session_id": self.session_id,
                    "total_cost_usd": 0.0,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                    "duration_ms": int((time.time() - self.started) * 1000),
                    "num_turns": 1,
                }
            )
        elif self.fmt == "codex":
            self.codex_error(message)
        elif self.fmt == "gemini":
            self.err(message)
            self.gemini_error("RESOURCE_EXHAUSTED", message, 429)
        else:
            self.err(message)
            self.out(message)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, ""))
    except ValueError:
        return default


def _new_session_id() -> str:
    """uuid4-shaped id without importing uuid (startup cost matters here)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Accept the real CLIs' flags too, so the sim can sit behind any adapter's command line."""
    parser = argparse.ArgumentParser(prog="sim_agent", add_help=True)
    parser.add_argument("--prompt-file")
    parser.add_argument("--format", choices=FORMATS)
    parser.add_argument("-p", "--prompt", "--print", nargs="?", const="")
    parser.add_argument("--resume", "-r")
    parser.add_argument("--output-format", "-o")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--input-format")
    parser.add_argument("--permission-prompt-tool")
    for flag in ("--permission-mode", "--model", "--allowedTools", "--disallowedTools"):
        parser.add_argument(flag)
    return parser.parse_known_args(argv)


def pick_format(args: argparse.Namespace, script: dict[str, Any]) -> str:
    for fmt in (args.format, script.get("format")):
        if fmt in FORMATS:
            return str(fmt)
    if args.json:
        return "codex"
    if args.output_format == "stream-json":
        return "claude"
    if args.output_format == "json":
        return "gemini"
    return "plain"


def read_prompt(args: argparse.Namespace, rest: list[str]) -> str:
    if args.input_format == "stream-json":
        return _user_text(sys.stdin.readline())
    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    if args.prompt:
        return str(args.prompt)
    words = [w for w in rest if not w.startswith("-") and w not in ("exec", "resume", "-")]
    if words:
        return words[-1]
    if sys.stdin is not None and not sys.stdin.isatty():
        return sys.stdin.read()
    return ""


def resume_id(args: argparse.Namespace, rest: list[str]) -> str | None:
    if args.resume:
        return str(args.resume)
    # codex form: `codex exec resume <SESSION_ID> ...`
    if "resume" in rest:
        i = rest.index("resume")
        if i + 1 < len(rest) and not rest[i + 1].startswith("-"):
            return rest[i + 1]
    return None


def load_script() -> dict[str, Any]:
    raw = os.environ.get("RELAY_SIM_SCRIPT", "").strip()
    if not raw:
        return dict(DEFAULTS)
    loaded = json.loads(raw)
    if not isinstance(loaded, dict):
        raise ValueError("RELAY_SIM_SCRIPT must be a JSON object")
    return {**DEFAULTS, **loaded}


def rate_limit_message(
    script: dict[str, Any], attempt: int, fmt: str = "plain"
) -> tuple[str, int] | None:
    """The limit to print, if this run hits one: by attempt, until a time, in one format."""
    spec = script.get("rate_limit")
    if not isinstance(spec, dict):
        return None
    if spec.get("format") not in (None, fmt):
        return None  # the limit belongs to another provider's CLI
    attempts = spec.get("attempts")
    if attempts is not None and attempt not in attempts:
        return None
    until = spec.get("until_epoch")
    if until is not None and time.time() >= float(until):
        return None
    return str(spec.get("message", "rate limit reached")), int(spec.get("exit_code", 1))


def choose_result(sim: Sim) -> dict[str, Any]:
    """Most specific scripted result wins: round.attempt, then round, then attempt, then result."""
    script = sim.script
    by_round = script.get("results_by_round") or {}
    by_attempt = script.get("results_by_attempt") or {}
    keys: list[tuple[dict[str, Any], str]] = []
    if sim.round is not None:
        combined = f"{sim.round}.{sim.attempt}"
        keys += [(by_round, combined), (by_attempt, combined), (by_round, str(sim.round))]
    keys.append((by_attempt, str(sim.attempt)))
    value: Any = script.get("result")
    if value is None and isinstance(script.get("review"), dict):
        value = review_verdict(script["review"], int(script.get("review_round", 1)))
    for table, key in keys:
        if key in table:
            value = table[key]
            break
    default_summary = f"sim finished {sim.task}"
    if value is None and sim.task.endswith(".troubleshoot"):
        return {"verdict": "give_up", "reason": "the sim agent does not troubleshoot unscripted"}
    if value is None:
        return {"summary": default_summary}
    if isinstance(value, str):
        return {"summary": value}
    if isinstance(value, dict):
        return value
    return {"summary": default_summary, "data": value}


DEFAULT_FINDINGS = [
    {"file": "README.md", "line": 1, "severity": "major", "text": "document the change"}
]


def review_verdict(review: dict[str, Any], round_: int) -> dict[str, Any]:
    """A final review's answer: changes on the scripted rounds, approve on every other."""
    if round_ in review.get("changes_on_rounds", []):
        findings = review.get("findings") or DEFAULT_FINDINGS
        summary = review.get("summary") or f"round {round_}: changes needed"
        return {"verdict": "changes", "summary": summary, "findings": findings}
    return {"verdict": "approve", "summary": f"round {round_}: looks good", "findings": []}


def resolve_conflicts(side: str) -> None:
    """Settle a merge in progress by taking one side of every conflicted file."""
    import subprocess

    listed = subprocess.run(
        ["git", "diff", "--name-only", "--diff-filter=U"],
        capture_output=True,
        text=True,
        check=False,
    )
    for path in listed.stdout.split():
        subprocess.run(["git", "checkout", f"--{side}", "--", path], check=False)
        subprocess.run(["git", "add", "--", path], check=False)


def write_result(result: dict[str, Any]) -> None:
    path = os.environ.get("RELAY_RESULT_FILE")
    if not path:
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    os.replace(tmp, path)


def spawn_grandchild(script: dict[str, Any]) -> None:
    import subprocess

    child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    pid_file = script.get("grandchild_pid_file")
    if pid_file:
        tmp = f"{pid_file}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(str(child.pid))
        os.replace(tmp, pid_file)


def _sleeper() -> int:
    """The pid of a process that outlives the agent unless someone kills it."""
    import subprocess

    quiet = subprocess.DEVNULL
    return subprocess.Popen(["sleep", "600"], stdin=quiet, stdout=quiet, stderr=quiet).pid


def spawn_daemon(script: dict[str, Any]) -> None:
    """Leave a process behind the way careless tools do: in our group, or a real daemon
    (fork, ``setsid``, fork again) that no process group or parent ever accounts for."""
    if script["spawn_daemon"] == "setsid":
        read_end, write_end = os.pipe()
        if os.fork() == 0:
            os.setsid()
            os.write(write_end, str(_sleeper()).encode())
            os._exit(0)
        os.close(write_end)
        pid = int(os.read(read_end, 32))
        os.wait()
    else:
        pid = _sleeper()
    pid_file = script.get("daemon_pid_file")
    if pid_file:
        with open(f"{pid_file}.tmp", "w", encoding="utf-8") as fh:
            fh.write(str(pid))
        os.replace(f"{pid_file}.tmp", pid_file)


def spew(sim: Sim, total: int, binary: bool) -> None:
    """Dump lots of output fast, to prove the engine never buffers a child's stdout."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    text_chunk = (b"spam spam spam spam spam spam spam spam spam spam spam spam spam\n" * 20000)[
        :_CHUNK
    ]
    while total > 0:
        n = min(total, _CHUNK)
        out.write(os.urandom(n) if binary else text_chunk[:n])
        total -= n
    out.write(b"\n")
    out.flush()


def work(sim: Sim) -> int:
    script = sim.script
    n = max(0, int(script["lines"]))
    duration = float(
        script.get("durations_by_attempt", {}).get(str(sim.attempt), script["duration"])
    )
    pause = duration / max(1, n)
    for i in range(1, n + 1):
        sim.progress(f"working on {sim.task}: step {i}/{n}")
        time.sleep(pause)
    if n == 0:
        time.sleep(duration)
    if script.get("output_bytes"):
        spew(sim, int(script["output_bytes"]), bool(script.get("binary")))
    result = choose_result(sim)
    write_result(result)
    exit_code = int(script["exit_code"])
    summary = result.get("summary")
    text = summary if isinstance(summary, str) and len(result) == 1 else json.dumps(result)
    sim.finish(text, is_error=exit_code != 0)
    return exit_code


def log_run(path: str, what: str) -> None:
    """One line per start and end, appended in one write, for overlap checks."""
    run = os.environ.get("RELAY_EXECUTION_ID", "")
    line = f"{what} {run} {os.getpid()} {time.time():.6f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _logged(path: str) -> None:
    """Log this run's start now and its end at exit, a SIGTERM's included."""
    log_run(path, "start")

    def on_term(_signum: int, _frame: object) -> None:
        log_run(path, "end")
        os._exit(143)

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, on_term)


def main(argv: list[str] | None = None) -> int:
    args, rest = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        script = load_script()
    except ValueError as exc:
        sys.stderr.write(f"sim_agent: bad RELAY_SIM_SCRIPT: {exc}\n")
        return 2
    if script.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if script.get("run_log"):
        _logged(str(script["run_log"]))
        try:
            return _main(args, rest, script)
        finally:
            log_run(str(script["run_log"]), "end")
    return _main(args, rest, script)


def _main(args: argparse.Namespace, rest: list[str], script: dict[str, Any]) -> int:
    fmt = pick_format(args, script)
    session = resume_id(args, rest) or str(script.get("session_id") or _new_session_id())
    sim = Sim(script, fmt, session, read_prompt(args, rest))
    if script.get("spawn_grandchild"):
        spawn_grandchild(script)
    if script.get("spawn_daemon"):
        spawn_daemon(script)
    sim.start()
    for event in script.get("emit") or []:
        sim.jsonl(event)
    limited = rate_limit_message(script, sim.attempt, fmt)
    if limited is not None:
        sim.rate_limited(limited[0])
        return limited[1]
    if sim.attempt <= int(script["fail_attempts"]):
        message = f"sim error: simulated failure of {sim.task} on attempt {sim.attempt}"
        sim.err(message)
        if fmt != "plain":
            sim.finish(message, is_error=True)
        return 1
    if script.get("resolve_conflicts") in ("ours", "theirs"):
        resolve_conflicts(str(script["resolve_conflicts"]))
    record_cwd(script, sim)
    write_files(script)
    if args.permission_prompt_tool == "stdio" and fmt == "claude":
        ask_all(sim, script.get("asks") or [])
    code = work(sim)
    if args.input_format == "stream-json":
        converse(sim)
    return code


def _user_text(line: str) -> str:
    """The text of a stream-json user message line (what claude reads on stdin)."""
    try:
        message = json.loads(line).get("message") or {}
    except (ValueError, AttributeError):
        return line.strip()
    content = message.get("content") if isinstance(message, dict) else ""
    return content if isinstance(content, str) else json.dumps(content)


def ask_all(sim: Sim, asks: list[dict[str, Any]]) -> None:
    """Ask for each scripted tool use the way claude's permission channel does, and act on
    the answer: write its files when allowed, say it was refused when not."""
    for number, ask in enumerate(asks, 1):
        request_id = f"sim-ask-{number}"
        tool, tool_input = str(ask.get("tool") or "Bash"), dict(ask.get("input") or {})
        request = {"subtype": "can_use_tool", "tool_name": tool, "input": tool_input,
                   "tool_use_id": f"toolu_sim_{number}"}  # fmt: skip
        sim.jsonl({"type": "control_request", "request_id": request_id, "request": request})
        answer = _await_answer(request_id)
        allowed = answer.get("behavior") == "allow"
        if allowed and tool == "AskUserQuestion":
            write_files({"write_files": {"answers.json": json.dumps(
                (answer.get("updatedInput") or {}).get("answers") or {})}})  # fmt: skip
        elif allowed:
            write_files({"write_files": ask.get("writes") or {}})
        said = "ran" if allowed else f"refused: {answer.get('message', '')}"
        sim.progress(f"{tool} {json.dumps(tool_input)} {said}")


def _await_answer(request_id: str) -> dict[str, Any]:
    for line in sys.stdin:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        response = (event.get("response") or {}) if isinstance(event, dict) else {}
        if response.get("request_id") == request_id:
            return dict(response.get("response") or {})
    return {"behavior": "deny", "message": "stdin closed"}


def converse(sim: Sim) -> None:
    """Like claude after its result: each further user line is another turn; EOF ends it."""
    for line in sys.stdin:
        text = _user_text(line)
        if text:
            sim.progress(f"noted: {text}")
            write_files({"write_files": {"operator-said.txt": text + "\n"}})
            sim.finish(f"noted: {text}", is_error=False)


def record_cwd(script: dict[str, Any], sim: Sim) -> None:
    """What the agent found where it ran, for tests that check where and on what it ran."""
    if not script.get("record_cwd"):
        return
    cwd = os.getcwd()
    seen = {"cwd": cwd, "files": sorted(os.listdir(cwd)), "round": sim.round,
            "attempt": sim.attempt}  # fmt: skip
    with open(str(script["record_cwd"]), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(seen) + "\n")


def write_files(script: dict[str, Any]) -> None:
    """Edit the working tree like a real agent, so worktrees and merges can be exercised."""
    for name, content in (script.get("write_files") or {}).items():
        path = os.path.join(os.getcwd(), name)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(str(content))


if __name__ == "__main__":
    sys.exit(main())
