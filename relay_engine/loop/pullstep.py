"""Tick step 3, job level: pull requests, final reviews, merges, and terminal jobs' work.

Each job with a pull request in play is reconciled on its own: ask the forge what it
says (when a check is due or the job has something to do), decide with
:func:`relay_engine.core.lifecycle.decide` inside one write transaction, then perform the one
forge action the decision asks for, claimed on the pull request row so that no two
processes merge or close the same pull request, and record its outcome. Forge calls
(git, ``gh``) run in a small thread pool, so a slow forge never stalls the tick.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select, update

from relay_engine.contracts.review import ReviewInput, review_prompt
from relay_engine.core.lifecycle import Action, Decision, Observation, decide
from relay_engine.core.states import ACTIVE_TASK_STATES, JobState, PullState
from relay_engine.git.forges import Forge, ForgeError, MergeAttempt, Opened, PullRef, forge_for
from relay_engine.git.worktrees import WorkspaceError, open_repo, release_job_branch
from relay_engine.loop.runtime import EngineRuntime
from relay_engine.ops.notes import claim_pending, record_write_failed, record_written
from relay_engine.ops.plans import task_summaries
from relay_engine.ops.pulls import (
    add_merge_prep,
    add_rebase,
    add_review,
    apply_decision,
    lifecycle_facts,
    new_pull,
    pull_ref,
    record_error,
    record_merge,
    record_opened,
    reviews_of,
    start_fix,
)
from relay_engine.store.db import Store
from relay_engine.store.schema import Job, PullRequest, Task

log = logging.getLogger(__name__)

CLAIM_TTL_S = 180.0  # longer than any one forge action (gh times out at 60 s)
DECIDING_STATES = (JobState.REVIEWING, JobState.READY)
ENDED_STATES = (JobState.MERGED, JobState.CLOSED)


@dataclass(frozen=True)
class _Act:
    """A claimed forge action, with what performing it needs from the database."""

    action: Action
    ref: PullRef
    review: ReviewInput | None = None


class PullRequests:
    """The job-level step of the tick; ``background=False`` runs reconciles inline (CLI)."""

    def __init__(self, runtime: EngineRuntime, *, background: bool = True) -> None:
        self.runtime = runtime
        self._pool = (
            ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"relay-pr-{runtime.engine_id}")
            if background
            else None
        )
        self._inflight: dict[str, Future[bool]] = {}

    @property
    def store(self) -> Store:
        return self.runtime.store

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._harvest()

    def tick(self, now: float) -> bool:
        """Start a reconcile of every job that has something to do or a forge check due."""
        changed = self._harvest()
        for job_id in self._due(now, checks=True):
            if self._pool is None:
                changed |= self.safe_reconcile(job_id, now)
            else:
                self._inflight[job_id] = self._pool.submit(self.safe_reconcile, job_id, now)
        return changed

    @property
    def in_flight(self) -> bool:
        """Reconciles started on an earlier tick: only a tick collects their outcomes."""
        return bool(self._inflight)

    def busy(self, now: float) -> bool:
        """Reconciles running, or jobs whose next step is more than waiting."""
        return bool(self._inflight) or bool(self._due(now, checks=False))

    def _harvest(self) -> bool:
        changed = False
        for job_id, future in list(self._inflight.items()):
            if future.done():
                del self._inflight[job_id]
                changed |= bool(future.result())
        return changed

    # -- which jobs -----------------------------------------------------------------------
    def _due(self, now: float, *, checks: bool) -> list[str]:
        interval = self.runtime.config.git.check_seconds
        auto_merge = self.runtime.config.git.auto_merge
        checks_on = bool(self.runtime.config.git.merge_checks)
        due = []
        with self.store.read() as session:
            for job, pr in _candidates(session):
                if job.id in self._inflight or (pr is not None and _held(pr, now)):
                    continue
                if checks and _check_due(pr, now, interval):
                    due.append(job.id)
                elif _may_act(job, pr):
                    facts = lifecycle_facts(
                        session, job, pr, auto_merge, None, merge_checks=checks_on
                    )
                    if not decide(facts).waits:
                        due.append(job.id)
        return due

    # -- one job --------------------------------------------------------------------------
    def safe_reconcile(self, job_id: str, now: float) -> bool:
        """:meth:`reconcile`; a failure is logged, never raised into the tick or the pool."""
        try:
            return self.reconcile(job_id, now)
        except Exception:
            log.exception("reconciling the pull request of job %s failed", job_id)
            return False

    def reconcile(self, job_id: str, now: float) -> bool:
        with self.store.read() as session:
            job = session.get(Job, job_id)
            pr = session.get(PullRequest, job_id)
        if job is None:
            return False
        forge: Forge | None = None
        observed: Observation | None = None
        git = self.runtime.config.git
        if pr is not None and pr.published:  # a pull request stays where it was opened
            git = git.model_copy(update={"forge": pr.forge, "remote": pr.remote})
        try:
            if job.repo_path:
                forge = forge_for(git, job.repo_path, self._root)
            if forge is not None and pr is not None and pr.published and pr.state == "OPEN":
                observed = forge.observe(pull_ref(job, pr))
        except (ForgeError, WorkspaceError) as error:
            return self._failed(job_id, str(error), now)
        act, acted = self._decide(job_id, (job.state, job.head_sha), observed, forge, now)
        if act is not None and forge is not None:
            try:
                outcome = self._perform(forge, act)
            except (ForgeError, WorkspaceError) as error:
                return self._failed(job_id, str(error), now)
            self._record(job_id, act, forge, outcome, now)
            acted = True
        if forge is not None and pr is not None and pr.published:
            acted |= self._write_back(job_id, forge, now)
        return acted

    def _write_back(self, job_id: str, forge: Forge, now: float) -> bool:
        """Write the job's new and changed notes on its pull request (``[git] publish``); a
        note the forge refuses keeps its reason and is written on a later check."""
        owner = self.runtime.engine_id
        pending = claim_pending(self.store, job_id, self.runtime.config.git.publish, owner, now)
        if not pending:
            return False
        with self.store.read() as session:
            job = session.get(Job, job_id)
            pr = session.get(PullRequest, job_id)
        if job is None or pr is None:
            return False
        ref = pull_ref(job, pr)
        for item in pending:
            try:
                comment_id = forge.publish(ref, item.note, item.comment_id)
            except ForgeError as error:
                record_write_failed(self.store, item, str(error), now)
                continue
            record_written(self.store, item, comment_id, forge.name, now)
        return True

    @property
    def _root(self) -> Path:
        return self.runtime.worktrees.root

    def _decide(
        self,
        job_id: str,
        seen: tuple[str, str | None],
        observed: Observation | None,
        forge: Forge | None,
        now: float,
    ) -> tuple[_Act | None, bool]:
        """Decide and record in one transaction; claim the forge action it asks for.

        Returns the claimed action (None: nothing to do, or another process has it) and
        whether the decision changed anything. ``seen`` is the job's state and head when the
        forge was read: a job that has moved since (a fix landed) is read again next tick,
        or the forge's older head would be reviewed.
        """
        git = self.runtime.config.git
        with self.store.write() as session:
            job = session.exec(select(Job).where(Job.id == job_id).with_for_update()).first()
            if job is None:
                return None, False
            if observed is not None and (job.state, job.head_sha) != seen:
                return None, True
            pr = session.get(PullRequest, job_id)
            facts = lifecycle_facts(
                session,
                job,
                pr,
                git.auto_merge,
                observed,
                record_at=now,
                merge_checks=bool(git.merge_checks),
            )
            decision = decide(facts)
            apply_decision(session, job, pr, decision, now)
            if pr is not None and observed is not None:
                pr.last_checked_at, pr.review_decision = now, observed.review_decision
                pr.error = None
                session.add(pr)
            if decision.action is Action.FIX:
                start_fix(session, job, now)
            if decision.action in (Action.NONE, Action.FIX) or forge is None:
                return None, not decision.waits
            if pr is None:
                pr = new_pull(job, forge.name, git.remote, now)
                session.add(pr)
            elif not pr.published:  # made by relay merge --force: it opens where this engine opens
                pr.forge, pr.remote = forge.name, git.remote
            session.flush()
            if not _claim(session, job_id, self.runtime.engine_id, now):
                return None, not decision.waits
            ref = pull_ref(job, pr)
            review = None
            if decision.action is Action.REVIEW:
                number = len(reviews_of(session, job_id)) + 1
                review = self._review_input(session, job, ref, number)
            return _Act(decision.action, ref, review), True

    def _review_input(self, session: Session, job: Job, ref: PullRef, number: int) -> ReviewInput:
        return ReviewInput(
            title=job.title or job.id,
            base_branch=ref.base_branch,
            head_branch=ref.head_branch,
            head_sha=ref.head_sha or "",
            diffstat="",
            diff="",
            round=number,
            tasks=task_summaries(session, job.id),
        )

    def _perform(self, forge: Forge, act: _Act) -> object:
        """The forge call, outside any transaction."""
        ref = act.ref
        if act.action is Action.OPEN:
            repo = open_repo(ref.repo_path)
            if repo is not None:
                release_job_branch(repo, self._root, ref.job_id)
            return forge.open(ref)
        if act.action is Action.REVIEW:
            assert act.review is not None and ref.head_sha
            stat, diff = forge.review_material(ref, ref.head_sha)
            parts = replace(act.review, diffstat=stat, diff=diff)
            return review_prompt(parts, self.runtime.config.git.review_diff_chars)
        if act.action in (Action.REBASE, Action.PREPARE):
            return forge.prepare_rebase(ref)  # the base as the forge has it, for the worktree
        if act.action is Action.MERGE:
            assert ref.head_sha
            return forge.merge(ref, ref.head_sha)
        forge.close(ref)
        return None

    def _record(self, job_id: str, act: _Act, forge: Forge, outcome: Any, now: float) -> None:
        retry = self.runtime.config.git.check_seconds
        with self.store.write() as session:
            job = session.exec(select(Job).where(Job.id == job_id).with_for_update()).one()
            pr = session.get(PullRequest, job_id)
            if pr is None:
                return
            pr.action_owner = pr.action_expires_at = None
            if act.action is not Action.MERGE:  # a merge says itself whether it failed
                pr.error = None
            session.add(pr)
            if act.action is Action.OPEN and job.state == JobState.REVIEWING:
                assert isinstance(outcome, Opened)
                record_opened(session, job, pr, outcome, now)
            elif act.action is Action.REVIEW and job.state == JobState.REVIEWING:
                add_review(session, job, pr, act.ref.head_sha or "", str(outcome), now)
            elif act.action is Action.REBASE and job.state == JobState.ACTIVE:
                add_rebase(session, job, pr, tuple(outcome), now)
            elif act.action is Action.PREPARE and job.state == JobState.ACTIVE:
                checks = self.runtime.config.git.merge_checks
                add_merge_prep(session, job, pr, tuple(outcome), checks, now)
            elif act.action is Action.MERGE and pr.state == PullState.OPEN:
                assert isinstance(outcome, MergeAttempt)
                record_merge(session, job, pr, outcome, retry, now)
            elif act.action is Action.CLOSE and pr.state == PullState.OPEN:
                apply_decision(session, job, pr, _closed_by_operator(forge.name), now)
            ended = job.state in ENDED_STATES
        if ended:
            self._release(job_id, act.ref.repo_path)

    def _release(self, job_id: str, repo_path: str) -> None:
        repo = open_repo(repo_path)
        if repo is not None:
            release_job_branch(repo, self._root, job_id)

    def _failed(self, job_id: str, error: str, now: float) -> bool:
        """Record the error on the pull request (created if need be) and back off."""
        git = self.runtime.config.git
        with self.store.write() as session:
            pr = session.get(PullRequest, job_id)
            job = session.get(Job, job_id)
            if pr is None and job is not None:
                pr = new_pull(job, git.forge, git.remote, now)
            if pr is None:
                return False
            pr.action_owner = pr.action_expires_at = None
            record_error(session, pr, error, git.check_seconds, now)
        return True


def _closed_by_operator(forge: str) -> Decision:
    return Decision(
        pr_to=PullState.CLOSED,
        job_to=JobState.CLOSED,
        cancel_work=True,
        reason=f"closed by the operator ({forge})",
    )


def _claim(session: Session, job_id: str, owner: str, now: float) -> bool:
    claimed = session.exec(
        update(PullRequest)
        .where(
            col(PullRequest.job_id) == job_id,
            or_(
                col(PullRequest.action_owner).is_(None),
                col(PullRequest.action_expires_at) < now,
            ),
        )
        .values(action_owner=owner, action_expires_at=now + CLAIM_TTL_S)
    )
    return claimed.rowcount == 1


def _candidates(session: Session) -> list[tuple[Job, PullRequest | None]]:
    """Jobs in review or ready, jobs with an open pull request, ended jobs with work left."""
    found: dict[str, tuple[Job, PullRequest | None]] = {}
    opened = select(Job, PullRequest).join(PullRequest, col(PullRequest.job_id) == Job.id)
    for job, pr in session.exec(opened.where(PullRequest.state == PullState.OPEN)):
        found[job.id] = (job, pr)
    deciding = select(Job).where(col(Job.state).in_(DECIDING_STATES))
    leftover = select(Task.job_id).where(col(Task.state).in_(list(ACTIVE_TASK_STATES)))
    ended = select(Job).where(col(Job.state).in_(ENDED_STATES), col(Job.id).in_(leftover))
    for query in (deciding, ended):
        for job in session.exec(query):
            if job.id not in found:
                found[job.id] = (job, session.get(PullRequest, job.id))
    return list(found.values())


def _held(pr: PullRequest, now: float) -> bool:
    """Backing off after a failure, or another process is performing a forge action."""
    if pr.retry_at is not None and pr.retry_at > now:
        return True
    return pr.action_owner is not None and (pr.action_expires_at or 0.0) > now


def _check_due(pr: PullRequest | None, now: float, interval: float) -> bool:
    if pr is None or not pr.published or pr.state != PullState.OPEN:
        return False
    return pr.last_checked_at is None or now - pr.last_checked_at >= interval


def _may_act(job: Job, pr: PullRequest | None) -> bool:
    requested = pr is not None and (pr.merge_requested or pr.close_requested)
    return job.state in DECIDING_STATES or job.state in ENDED_STATES or requested
