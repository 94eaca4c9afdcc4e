"""``relay takeover``, ``relay handback`` and ``relay say``: stepping in on a task.

Taking over stops the headless run (if one runs), marks the task HELD and opens the agent's
own CLI in the task's worktree, resumed from its session: in a new tmux window when relay
runs inside tmux, else as a line to paste. Handing back either merges what the worktree
holds (``--done``) or lets the next headless attempt run on in the same session with the
operator's words (``--continue TEXT``).
"""

from __future__ import annotations

import argparse
import getpass
import socket

from relay_engine.agents.takeover import open_in_tmux
from relay_engine.cli.inbox import apply_command
from relay_engine.cli.output import console, open_store, workspace_of
from relay_engine.contracts.config import load_config
from relay_engine.contracts.keys import split_key
from relay_engine.ops import commands
from relay_engine.ops.takeover import merge_handed_back, resume_line


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="JOB/TASK")
    if name == "takeover":
        parser.add_argument("--print", action="store_true", help="print the line, open no window")
        parser.set_defaults(func=cmd_takeover)
    elif name == "handback":
        how = parser.add_mutually_exclusive_group(required=True)
        how.add_argument("--done", action="store_true", help="merge what its worktree holds")
        how.add_argument("--continue", dest="text", help="run on headless, reading this")
        parser.set_defaults(func=cmd_handback)
    else:
        parser.add_argument("text")
        parser.set_defaults(func=cmd_say)


def operator_name() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def cmd_takeover(args: argparse.Namespace) -> int:
    split_key(args.task)
    if not apply_command(open_store(args), commands.TakeOver(task=args.task, by=operator_name())):
        return 1
    workspace = workspace_of(args)
    line = resume_line(open_store(args), workspace, load_config(workspace), args.task)
    why = "--print" if args.print else open_in_tmux(line, f"relay:{args.task}")
    if why is None:
        console.print(f"opened a tmux window on {line.worktree}", markup=False)
    else:
        console.print(line.command_line, markup=False, soft_wrap=True)
    console.print(f"when you are done: relay handback {args.task} --done (or --continue TEXT)")
    return 0


def cmd_handback(args: argparse.Namespace) -> int:
    split_key(args.task)
    if args.done:
        merge_handed_back(open_store(args), workspace_of(args), args.task)
    command = commands.HandBack(task=args.task, done=bool(args.done), text=args.text)
    return 0 if apply_command(open_store(args), command) else 1


def cmd_say(args: argparse.Namespace) -> int:
    split_key(args.task)
    return 0 if apply_command(open_store(args), commands.Say(task=args.task, text=args.text)) else 1
