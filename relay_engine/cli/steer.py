"""The commands that steer work: cancel, retry, pin, replan, approve, budget, plan,
merge and close. Each stores an operator command, applies it (any engine may get there
first) and prints its outcome."""

from __future__ import annotations

import argparse
import json
import os
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relay_engine.cli.output import command, console, workspace_of
from relay_engine.cli.status import pull_lines, status_report
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


def add_task_commands(sub: Any) -> None:
    for name, model, helptext in (
        ("cancel", commands.CancelTask, "cancel a task and drop the tasks that need it"),
        ("retry", commands.RetryTask, "retry a task"),
        ("drop", commands.DropTask, "drop a task not needed: its dependents go on without it"),
    ):
        parser = sub.add_parser(name, help=helptext)
        parser.add_argument("task", help="JOB/TASK")
        parser.set_defaults(func=command(_task_command(model)))
    pin = sub.add_parser("pin", help="pin a workstream (or JOB/TASK) to an agent")
    pin.add_argument("job", help="JOB, or JOB/TASK to pin one task")
    pin.add_argument("workstream", nargs="?", default="")
    pin.add_argument("agent")
    pin.add_argument("--role", default="implementer")
    pin.set_defaults(func=command(_pin_command))


def add_job_commands(sub: Any) -> None:
    cancel_job = sub.add_parser("cancel-job", help="cancel a whole job")
    cancel_job.add_argument("job")
    cancel_job.set_defaults(func=command(lambda a: commands.CancelJob(job=a.job)))
    replan = sub.add_parser("replan", help="start a new planner round with guidance")
    replan.add_argument("job")
    replan.add_argument("--guidance", "-g", default="", help="what the planner should change")
    replan.set_defaults(func=command(lambda a: commands.Replan(job=a.job, guidance=a.guidance)))
    budget = sub.add_parser("budget", help="raise a job's budget; work parked on it resumes")
    budget.add_argument("job")
    budget.add_argument("--add", type=float, dest="add_usd", help="dollars to add")
    budget.add_argument("--tokens", type=int, dest="add_tokens", help="tokens to add")
    budget.set_defaults(
        func=command(
            lambda a: commands.RaiseBudget(job=a.job, add_usd=a.add_usd, add_tokens=a.add_tokens)
        )
    )
    approve = sub.add_parser("approve", help="approve the next wave of a gated job")
    approve.add_argument("job")
    approve.set_defaults(func=command(lambda a: commands.ApproveWave(job=a.job)))
    plan = sub.add_parser("plan", help="install a plan written by hand")
    plan.add_argument("job")
    plan.add_argument("--file", "-f", required=True, help="plan TOML or JSON")
    plan.set_defaults(func=command(_plan_command))


def add_pull_commands(sub: Any) -> None:
    merge = sub.add_parser("merge", help="merge a job's pull request (READY, or any with --force)")
    merge.add_argument("job")
    merge.add_argument("--force", action="store_true", help="merge even without an approval")
    merge.set_defaults(
        func=command(lambda a: commands.Merge(job=a.job, force=a.force), _settle_pull)
    )
    close = sub.add_parser("close", help="close a job's pull request and cancel its work")
    close.add_argument("job")
    close.set_defaults(func=command(lambda a: commands.Close(job=a.job), _settle_pull))
