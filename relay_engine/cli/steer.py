"""The commands that steer work: cancel, retry, pin, replan, approve, budget, plan,
merge, close and answer (an agent's ask). Each stores an operator command, applies it (any engine may get there
first) and prints its outcome."""

from __future__ import annotations

import argparse
import json
import os
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from relay_engine.cli.inbox import command
from relay_engine.cli.output import console, workspace_of
from relay_engine.cli.status import pull_lines, status_report
from relay_engine.contracts.amounts import parse_dollars, parse_tokens
from relay_engine.contracts.config import load_config
from relay_engine.contracts.inputs import check_json_shape, check_toml_shape, read_capped
from relay_engine.contracts.keys import split_key
from relay_engine.ops import commands
from relay_engine.store.db import Store


def _settle_pull(args: argparse.Namespace, store: Store) -> int:
    """Perform the merge or close now, so it happens whether or not an engine runs."""
    from relay_engine.git.worktrees import Worktrees
    from relay_engine.loop.pullstep import PullRequests
    from relay_engine.loop.runtime import EngineRuntime
    from relay_engine.store.engines import this_host

    workspace = workspace_of(args)
    runtime = EngineRuntime(
        engine_id=f"cli-{os.getpid()}",
        host=this_host(),
        workspace=workspace,
        store=store,
        config=load_config(workspace),
        wake=lambda *_: None,
        worktrees=Worktrees(workspace),
    )
    PullRequests(runtime, background=False).safe_reconcile(args.job, time.time())
    (job,) = status_report(store, args.job)["jobs"]
    console.print(f"job {job['id']} is {job['state']}", markup=False)
    for line in pull_lines(job):
        console.print(line, markup=False, highlight=False)
    return 1 if job["pr"] and job["pr"]["error"] else 0


def _plan_command(args: argparse.Namespace) -> commands.InstallPlan:
    path = Path(args.file)
    config = load_config(workspace_of(args))
    is_json = path.suffix == ".json"
    try:
        text = read_capped(path, config.inputs.max_file_bytes)
        (check_json_shape if is_json else check_toml_shape)(
            text, max_bytes=config.inputs.max_file_bytes
        )
        plan = json.loads(text) if is_json else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: cannot use this plan: {error}") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror}") from None
    return commands.InstallPlan(job=args.job, plan=plan)


def _task_command(
    model: type[commands.CancelTask] | type[commands.RetryTask] | type[commands.DropTask],
) -> Callable[[argparse.Namespace], commands.OperatorCommand]:
    def build(args: argparse.Namespace) -> commands.OperatorCommand:
        split_key(args.task)
        return model(task=args.task)

    return build


def _pin_command(args: argparse.Namespace) -> commands.Pin:
    if "/" in args.job:
        return commands.Pin(task=args.job, agent=args.agent)
    return commands.Pin(job=args.job, workstream=args.workstream, role=args.role, agent=args.agent)


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    if name in TASK_COMMANDS:
        parser.add_argument("task", help="JOB/TASK")
        parser.set_defaults(func=command(_task_command(TASK_COMMANDS[name])))
    elif name == "answer":
        _answer(parser)
    elif name == "pin":
        parser.add_argument("job", help="JOB, or JOB/TASK to pin one task")
        parser.add_argument("workstream", nargs="?", default="")
        parser.add_argument("agent")
        parser.add_argument("--role", default="implementer")
        parser.set_defaults(func=command(_pin_command))
    else:
        parser.add_argument("job")
        _JOB_ARGUMENTS[name](parser)


def _answer(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ask", type=int, help="the ask's number (relay asks)")
    parser.add_argument("answer", choices=("allow", "deny"), nargs="?", default="allow")
    parser.add_argument(
        "--always",
        choices=("task", "job", "agent"),
        help="also add the rule it needed (relay asks shows it) for this task, job or agent",
    )
    parser.add_argument("--text", help="the reason the agent reads, or a question's answer")
    parser.set_defaults(func=command(_answer_command))


def _answer_command(args: argparse.Namespace) -> commands.AnswerAsk:
    kind = "answer" if args.text and args.answer == "allow" else args.answer
    return commands.AnswerAsk(
        ask=args.ask, answer=kind, text=args.text, always=args.always, by="cli"
    )


TASK_COMMANDS: dict[str, type[commands.CancelTask | commands.RetryTask | commands.DropTask]] = {
    "cancel": commands.CancelTask,
    "retry": commands.RetryTask,
    "drop": commands.DropTask,
}


def _cancel_job(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=command(lambda a: commands.CancelJob(job=a.job)))


def _replan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--guidance", "-g", default="", help="what the planner should change")
    parser.set_defaults(func=command(lambda a: commands.Replan(job=a.job, guidance=a.guidance)))


Number = TypeVar("Number", int, float)


def typed(parse: Callable[[str], Number | str]) -> Callable[[str], Number]:
    """An argparse type from a parser that returns its value or what is wrong: argparse
    prints the same sentence the console's dialog shows."""

    def read(text: str) -> Number:
        value = parse(text)
        if isinstance(value, str):
            raise argparse.ArgumentTypeError(value)
        return value

    return read


def _budget(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--add", type=typed(parse_dollars), dest="add_usd", help="dollars to add")
    parser.add_argument(
        "--tokens", type=typed(parse_tokens), dest="add_tokens", help="tokens to add"
    )
    parser.set_defaults(
        func=command(
            lambda a: commands.RaiseBudget(job=a.job, add_usd=a.add_usd, add_tokens=a.add_tokens)
        )
    )


def _approve(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=command(lambda a: commands.ApproveWave(job=a.job)))


def _plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", "-f", required=True, help="plan TOML or JSON")
    parser.set_defaults(func=command(_plan_command))


def _merge(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="merge even without an approval")
    parser.set_defaults(
        func=command(lambda a: commands.Merge(job=a.job, force=a.force), _settle_pull)
    )


def _close(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=command(lambda a: commands.Close(job=a.job), _settle_pull))


_JOB_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "cancel-job": _cancel_job,
    "replan": _replan,
    "budget": _budget,
    "approve": _approve,
    "plan": _plan,
    "merge": _merge,
    "close": _close,
}
