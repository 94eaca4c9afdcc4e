"""The database schema: SQLModel tables for every durable fact relay keeps.

This is the only module that knows table and column names. Timestamps are float epoch
seconds (UTC) so that SQLite and PostgreSQL compare them the same way and the pure
decision functions can take ``now`` as a plain number.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, Text, text
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 2
"""Kept in ``relay_schema`` only to fence relay 0.1.0 off: it refuses any version above 1.
The schema itself is versioned by Alembic (see :mod:`relay_engine.store.migrate`)."""

CLAIMED = "execution_id IS NOT NULL AND state IN ('QUEUED', 'RUNNING')"
"""A task holds its scopes while it is claimed; every other transition clears the claim."""


def _while_claimed(name: str, *columns: str, also: str) -> Index:
    """A unique index over the claimed tasks only: the database refuses a second claim on
    a scope whatever engine tries, with no lock held between claims."""
    where = text(f"{CLAIMED} AND {also}")
    return Index(name, *columns, unique=True, sqlite_where=where, postgresql_where=where)


def _json(default: Any = None) -> Any:
    """A JSON column whose default also applies to rows inserted without the ORM."""
    factory = (lambda: list(default)) if isinstance(default, list) else (lambda: default)
    column = Column(JSON, nullable=True, default=factory if default is not None else None)
    return Field(default_factory=factory, sa_column=column)


def _text(default: str = "") -> Any:
    return Field(default=default, sa_column=Column(Text, nullable=False, default=default))


def _optional_text() -> Any:
    return Field(default=None, sa_column=Column(Text, nullable=True))


class SchemaInfo(SQLModel, table=True):
    __tablename__ = "relay_schema"
    id: int = Field(default=1, primary_key=True)
    version: int


class Job(SQLModel, table=True):
    __tablename__ = "relay_job"
    id: str = Field(primary_key=True)
    title: str = ""
    objective: str = _text()
    repo_path: str | None = None
    base_branch: str = "main"
    job_branch: str | None = None
    priority: str = "P2"
    mode: str = "manual"
    wave_gate: str = "auto"
    auto_merge: bool = False
    review_enabled: bool = True
    max_review_rounds: int = 3
    state: str = Field(default="ACTIVE", index=True)
    error: str | None = _optional_text()
    head_sha: str | None = None
    spec_hash: str = ""
    source_path: str | None = None
    approved_wave: int = 0
    max_plan_rounds: int = 5
    after: list[str] = _json([])  # jobs this one waits for (it stays DRAFT until they are done)
    troubleshoot: bool = True  # a task that fails for good gets a troubleshooter first
    budget_usd: float | None = None
    budget_tokens: int | None = Field(default=None, sa_type=BigInteger)
    budget_said: str | None = None  # the budget level last announced ("warning", "exhausted")
    blocked_by: str | None = _optional_text()
    sim: dict[str, Any] | None = _json()
    created_at: float = 0.0
    updated_at: float = 0.0


class Task(SQLModel, table=True):
    __tablename__ = "relay_task"
    __table_args__ = (
        Index("ix_relay_task_job_state", "job_id", "state"),
        # Dispatch reads the top of the ready queue in this order (see dispatch.read_queue).
        Index("ix_relay_task_queue", "state", "priority", "created_at", "key"),
        Index("ix_relay_task_resumed", "resumed_at"),  # the few resumed tasks go first
        _while_claimed("ux_relay_task_workstream", "job_id", "workstream",
                       also="workstream IS NOT NULL"),
        _while_claimed("ux_relay_task_directory", "lock_dir", also="lock_dir IS NOT NULL"),
    )  # fmt: skip
    key: str = Field(primary_key=True)  # "JOB/TASK"
    job_id: str = Field(index=True)
    task_id: str
    kind: str = "work"
    title: str = ""
    input: str = _text()
    role: str = "implementer"
    model_class: str | None = None
    workstream: str | None = None
    priority: str = "P2"
    story_size: str = "M"
    dependencies: list[str] = _json([])
    external_deps: list[str] = _json([])  # "JOB/TASK" of other jobs' tasks it waits for
    state: str = Field(default="DRAFT", index=True)
    attempt: int = 0
    max_attempts: int = 3
    recoveries: int = 0  # runs lost with their engine: refunded, but bounded on their own
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    lock_dir: str | None = None  # the shared directory it runs in (a repo that is not git)
    execution_id: str | None = Field(default=None, index=True)
    execution_history: list[str] = _json([])
    timeout_s: float | None = None
    not_before: float | None = None
    waiting_on_provider: str | None = None
    parked_at: float | None = None
    resumed_at: float | None = None
    pinned_agent: str | None = None
    agent: str | None = None
    provider: str | None = None
    plan_id: int | None = None
    wave: int = 1
    blocked_by: str | None = None
    result_summary: str | None = _optional_text()
    result: Any = _json()
    error: str | None = _optional_text()
    spec_hash: str = ""
    sim: dict[str, Any] | None = _json()
    diffstat: str | None = _optional_text()
    commit_sha: str | None = None
    parent_key: str | None = None  # a troubleshooter's failed task
    troubleshoots: int = 0  # troubleshooters this task has had (at most one)
    guidance: str | None = _optional_text()  # a troubleshooter's advice for the next attempt
    operator_notes: list[str] = _json([])  # ``relay say`` words for the next prompt
    held_by: str | None = None  # who took it over (HELD), e.g. "root@build-7"
    held_at: float | None = None
    keep_work: bool = False  # handed back to run on: its next run keeps its branch's work
    started_at: float | None = None
    finished_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


class Plan(SQLModel, table=True):
    __tablename__ = "relay_plan"
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    round: int = 1
    source: str = "model-planner"
    previous_plan_id: int | None = None
    trigger: str = "initial"
    guidance: str | None = None
    status: str = Field(default="PLANNING", index=True)
    objective_status: str | None = None
    assessment: str | None = _optional_text()
    generated_task_ids: list[str] = _json([])
    children_stored: bool = False
    result: Any = _json()
    rejection: str | None = _optional_text()
    attempt: int = 0
    max_attempts: int = 3
    recoveries: int = 0
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    execution_id: str | None = None
    agent: str | None = None
    error: str | None = _optional_text()
    created_at: float = 0.0
    updated_at: float = 0.0


class PullRequest(SQLModel, table=True):
    """A job's pull request: relay's own record (forge ``local``) or a forge's (``github``).

    ``state`` follows what the forge last said; the ``*_requested`` flags carry operator
    commands to whichever process performs the forge call, and ``action_owner`` claims that
    call so two engines never merge or close the same pull request at once.
    """

    __tablename__ = "relay_pull_request"
    job_id: str = Field(primary_key=True)
    forge: str = "local"
    remote: str | None = None
    number: int | None = None
    url: str | None = None
    base_branch: str = "main"
    head_branch: str = ""
    head_sha: str | None = None
    state: str = Field(default="OPEN", index=True)
    published: bool = False
    mergeable: str | None = None  # MERGEABLE | CONFLICTING | UNKNOWN
    review_decision: str | None = None  # the forge's own (GitHub reviewDecision)
    merge_commit: str | None = None
    note: str | None = _optional_text()  # why it waits, e.g. "ready to merge: run ..."
    error: str | None = _optional_text()
    merge_requested: bool = False
    force_merge: bool = False
    close_requested: bool = False
    rebases: int = 0
    action_owner: str | None = None
    action_expires_at: float | None = None
    retry_at: float | None = None
    last_checked_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


class Review(SQLModel, table=True):
    """One round of a job's final review: the head it looked at and what it said."""

    __tablename__ = "relay_review"
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    number: int = 1
    task_key: str = ""
    head_sha: str | None = None
    verdict: str | None = None  # approve | changes | invalid; None while it runs
    summary: str | None = _optional_text()
    findings: list[dict[str, Any]] = _json([])
    stale: bool = False
    followed_up: bool = False  # the fix work for a "changes" verdict has been started
    created_at: float = 0.0
    finished_at: float | None = None


class Execution(SQLModel, table=True):
    __tablename__ = "relay_execution"
    id: str = Field(primary_key=True)  # the fencing token
    job_id: str = Field(index=True)
    task_key: str | None = Field(default=None, index=True)
    plan_id: int | None = None
    engine_id: str = ""
    attempt: int = 0
    agent: str | None = None
    provider: str | None = None
    account: str | None = None  # the agent's named account (None: the provider's default)
    argv: list[str] = _json([])
    cwd: str | None = None
    pid: int | None = None
    pgid: int | None = None
    started_at: float | None = None
    ended_at: float | None = Field(default=None, index=True)
    exit_code: int | None = None
    outcome: str | None = None
    artifact_dir: str | None = None
    last_output: str | None = None
    session_id: str | None = None
    # 64 bits, as on SQLite: a long session's cache reads pass 32 bits' 2.1 billion
    input_tokens: int | None = Field(default=None, sa_type=BigInteger)
    output_tokens: int | None = Field(default=None, sa_type=BigInteger)
    cached_tokens: int | None = Field(default=None, sa_type=BigInteger)
    model: str | None = None
    cost_usd: float | None = None
    cost_estimated: bool = False
    error: str | None = _optional_text()
    # tool requests refused: by relay, the operator or the CLI
    denials: list[dict[str, Any]] = _json([])


class Event(SQLModel, table=True):
    __tablename__ = "relay_event"
    id: int | None = Field(default=None, primary_key=True)
    at: float = 0.0
    job_id: str | None = Field(default=None, index=True)
    task_key: str | None = Field(default=None, index=True)
    plan_id: int | None = None
    kind: str = ""
    level: str = "info"
    message: str = _text()
    data: dict[str, Any] | None = _json()


class Command(SQLModel, table=True):
    """Durable operator commands, so a console on one host can steer engines on another."""

    __tablename__ = "relay_command"
    id: int | None = Field(default=None, primary_key=True)
    kind: str
    payload: dict[str, Any] | None = _json()
    created_at: float = 0.0
    applied_at: float | None = Field(default=None, index=True)
    applied_by: str | None = None
    outcome: str | None = None
    succeeded: bool | None = None


class EngineRecord(SQLModel, table=True):
    __tablename__ = "relay_engine"
    id: str = Field(primary_key=True)  # boot id, unique per engine start
    host: str = ""
    pid: int = 0
    process_start: float | None = None  # wall time: moves when the clock is set
    start_ticks: int | None = Field(default=None, sa_type=BigInteger)
    """When its process started, in clock ticks since boot (Linux): with host and pid, the
    process's identity, whatever the wall clock does."""
    started_at: float = 0.0
    heartbeat_at: float = 0.0
    stopped_at: float | None = None
    role: str = "run"
    condition: str | None = None  # what holds the engine up ("disk full"), None when nothing
    wake_ups: str | None = None
    """Whether it hears other processes' writes at once (:mod:`relay_engine.store.wakes`):
    "heard", "not heard" (it ticks at its interval instead) or "off"; None: not said yet."""
    slots: int = 0  # its max_concurrent_agents
    agents: list[str] = _json([])  # the agents its own config defines
    asleep_since: float | None = None
    """When it last found the fleet with nothing to do and began to sleep between heartbeats
    (until a wake-up or a timed wait's end); None while it ticks at its interval."""


class AgentRecord(SQLModel, table=True):
    """Agents as each engine read them from its own config, so remote consoles can list
    them; engines with different configs each keep their own rows."""

    __tablename__ = "relay_agent"
    engine_id: str = Field(default="", primary_key=True)
    id: str = Field(primary_key=True)
    provider: str = "sim"
    account: str | None = None
    roles: list[str] = _json([])
    model_class: str | None = None
    enabled: bool = True
    max_concurrent: int | None = None
    updated_at: float = 0.0


class ProviderLimit(SQLModel, table=True):
    """A usage limit on an account key: ``claude`` (the provider's default account, what
    relay always kept here) or ``claude/work`` (a named one)."""

    __tablename__ = "relay_provider_limit"
    provider: str = Field(primary_key=True)
    status: str = "ok"
    reset_at: float | None = None
    source_text: str | None = None
    detected_at: float | None = None
    consecutive_hits: int = 0
    updated_at: float = 0.0


class QuotaWindow(SQLModel, table=True):
    """How much of a plan's window an account has used, as its CLI last reported it
    (claude's ``rate_limit_event``, codex's ``rate_limits``): what the watermark decision and
    the console's gauges read."""

    __tablename__ = "relay_quota_window"
    key: str = Field(primary_key=True)  # the account key: "claude" or "claude/work"
    window: str = Field(primary_key=True)  # five_hour | seven_day | seven_day_opus | …
    provider: str = ""
    account: str = ""
    status: str = "allowed"  # allowed | allowed_warning | rejected
    utilization: float | None = None  # 0..1; None when the CLI did not say
    resets_at: float | None = None
    window_minutes: int | None = None
    threshold: float | None = None  # the warning threshold the CLI said was crossed
    overage: str | None = None
    agent: str | None = None  # whose run reported it last
    observed_at: float = 0.0


class Schedule(SQLModel, table=True):
    """A scheduled job file: the template its runs (jobs ``<id>@<slot>``) are made from, and
    the cursor up to which its slots are decided (moved by compare-and-swap, so of two
    engines deciding one slot only one starts its run)."""

    __tablename__ = "relay_schedule"
    id: str = Field(primary_key=True)
    cron: str
    timezone: str = "UTC"
    catch_up: str = "last"
    spec: dict[str, Any] = _json({})
    spec_hash: str = ""
    source_path: str | None = None
    cursor_at: float = 0.0  # every slot at or before this is decided
    last_run_job: str | None = None
    last_run_at: float | None = None  # the slot of the last run
    missed_count: int = 0  # slots passed over while no engine ran, all told
    last_missed_at: float | None = None
    problem: str | None = None  # why the last run could not be made, until one can
    paused_at: float | None = None  # `relay schedules pause`: no runs start until resumed
    created_at: float = 0.0
    updated_at: float = 0.0


class PullNote(SQLModel, table=True):
    """An item relay writes back on a job's pull request (``core/writeback.py``): the text as
    relay last rendered it, and what the forge holds of it (the comment's id and the digest
    it was written with), so an update edits that comment and a retry never adds one."""

    __tablename__ = "relay_pr_note"
    job_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)  # plan:2 | assessment:JOB/TASK | review:1 | failure:…
    kind: str = ""
    body: str = _text()
    line_comments: list[dict[str, Any]] = _json([])
    digest: str = ""
    posted_digest: str | None = None
    comment_id: str | None = None
    forge: str | None = None
    error: str | None = _optional_text()
    claimed_by: str | None = None  # the engine writing it to the forge now
    claim_expires_at: float | None = None
    posted_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


class Assignment(SQLModel, table=True):
    __tablename__ = "relay_assignment"
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    workstream: str = ""
    role: str = "implementer"
    agent_id: str = ""
    mode: str = "pinned"
    status: str = "active"
    executions: int = 0
    last_execution_id: str | None = None
    reason: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


class ProviderSession(SQLModel, table=True):
    __tablename__ = "relay_provider_session"
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    workstream: str = ""
    role: str = ""
    agent_id: str = ""
    provider: str = ""
    session_id: str = ""
    status: str = "active"
    last_started_at: float | None = None
    last_resumed_at: float | None = None
    last_failed_at: float | None = None


class Memory(SQLModel, table=True):
    """A job's memory, per workstream ("" for tasks without one): what relay noted of each
    finished task (``source`` "relay") and what agents added with ``memory_add`` ("agent",
    with the execution that said it)."""

    __tablename__ = "relay_memory"
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    workstream: str = ""
    note: str = _text()
    task_key: str | None = None
    source: str = "relay"
    execution_id: str | None = None
    created_at: float = 0.0


class NotifyCursor(SQLModel, table=True):
    """How far each notification destination has been sent, shared by every engine."""

    __tablename__ = "relay_notify_cursor"
    destination: str = Field(primary_key=True)
    last_event_id: int = 0
    gaps: list[list[float]] | None = _json()
    """Ids below ``last_event_id`` not seen yet, each with when it was first missed: events
    of transactions still open when the cursor passed them (:mod:`relay_engine.store.feed`)."""
    updated_at: float = 0.0


class AgentStatus(SQLModel, table=True):
    """An agent that could not work at all (login, network, CLI), and until when.

    No row, or status "ready", means available. ``config_hash`` is the agent's config when
    it was marked: an edited agent is a different agent and starts ready again.
    """

    __tablename__ = "relay_agent_status"
    agent_id: str = Field(primary_key=True)
    provider: str = ""
    status: str = "ready"  # ready | auth | unreachable | cli-missing | cli-rejected
    reason: str | None = _optional_text()
    fix: str | None = _optional_text()
    until: float | None = None  # unreachable: when the next probe may run
    failures: int = 0  # consecutive failures of this class (the probe back-off)
    config_hash: str = ""
    since: float | None = None
    updated_at: float = 0.0


class Ask(SQLModel, table=True):
    """A tool request or question of an agent's that no rule decided: a durable row, so any
    console or CLI on the database answers it, whichever engine runs the agent.

    ``status``: open, then answered (by the operator) and relayed (the running engine handed
    the answer to the CLI); or expired (no answer within ``timeout_at``: denied) or
    cancelled (the run ended first).
    """

    __tablename__ = "relay_ask"
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    task_key: str | None = Field(default=None, index=True)
    execution_id: str = Field(default="", index=True)
    engine_id: str = ""
    agent: str = ""
    provider: str = ""
    kind: str = "permission"  # permission | question
    request_id: str = ""  # the CLI's own id for the request, echoed in the answer
    tool: str = ""
    tool_input: dict[str, Any] | None = _json()
    summary: str = _text()  # "Bash npm test", what the operator reads first
    context: str | None = _optional_text()  # the agent's last message before it asked
    suggested_rule: str | None = None  # what an "always" answer would add
    status: str = Field(default="open", index=True)
    answer: str | None = None  # allow | deny | answer (a question's text)
    answer_text: str | None = _optional_text()  # the deny message, or the question's answer
    answered_by: str | None = None
    rule_added: str | None = None  # "job:Bash(npm test:*)" when answered "always"
    asked_at: float = 0.0
    timeout_at: float | None = None
    answered_at: float | None = None
    relayed_at: float | None = None


class PermissionRule(SQLModel, table=True):
    """A rule an operator added with an "always" answer, for one task, job or agent."""

    __tablename__ = "relay_permission_rule"
    id: int | None = Field(default=None, primary_key=True)
    scope: str = "job"  # task | job | agent
    target: str = Field(default="", index=True)  # the task key, job id or agent id
    effect: str = "allow"  # allow | deny
    rule: str = ""
    ask_id: int | None = None
    created_by: str | None = None
    created_at: float = 0.0
