"""How tasks are addressed: ``JOB/TASK``, the task's ``key`` everywhere relay names it.

Pure: two string functions.
"""

from __future__ import annotations


def task_key(job_id: str, task_id: str) -> str:
    return f"{job_id}/{task_id}"


def split_key(key: str) -> tuple[str, str]:
    """``JOB/TASK`` -> (job, task); a clear error for anything else."""
    job_id, sep, task_id = key.partition("/")
    if not sep or not job_id or not task_id:
        raise ValueError(f"{key!r} is not a task address; write it as JOB/TASK")
    return job_id, task_id
