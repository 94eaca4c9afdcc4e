"""A task's cost does not grow with its job: dependent tasks in a big job against
independent ones.

    .venv/bin/python bench/job_shape.py [--tasks 600] [--rounds 2] [--db postgresql://…]

One in-process engine (8 slots) runs jobs of ``--tasks`` and of twice as many /bin/true
tasks, each shape on a fresh database (``--db``: a PostgreSQL server to make them on, else
SQLite): all independent, and in 8 chains (each task waits on the one 8 before it, so the
rest of the job is DRAFT until its turn). Every exit releases a dependent; each read all
of its job's drafts once, and a chained job of 1,200 tasks cost 2.2 times the CPU per task
of an independent one (1.3 once the database finds the dependents). It prints each run,
the chained / independent ratio at each size (flat: it stays the same as the job grows)
and chained at twice the size over chained at the size (flat: about 1). The shapes
alternate within a round, so neighbours on a shared VM touch both. Never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from batch_cost import one_run

SLOTS = 8
CHAINS = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--db", help="a PostgreSQL server URL to make each run's database on")
    args = parser.parse_args()
    sizes = (args.tasks, 2 * args.tasks)
    shapes = {"independent": 0, "chained": CHAINS}
    per_task: dict[tuple[str, int], list[float]] = {}
    print(f"/bin/true tasks, one engine of {SLOTS} slots, {'PostgreSQL' if args.db else 'SQLite'}")
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for size in sizes:
                for shape, chains in shapes.items():
                    result = one_run(Path(tmp), args.db, SLOTS, size, chains)
                    ms = result["cpu_ms"] / size
                    per_task.setdefault((shape, size), []).append(ms)
                    print(f"  round {round_ + 1}: {size:5d} {shape:11} {ms:6.2f} ms per task")
    median = {key: statistics.median(values) for key, values in per_task.items()}
    for size in sizes:
        ratio = median["chained", size] / median["independent", size]
        print(f"{size} tasks: chained / independent CPU per task {ratio:.2f}")
    growth = median["chained", sizes[1]] / median["chained", sizes[0]]
    print(f"chained, {sizes[1]} tasks / {sizes[0]}: {growth:.2f} (flat: about 1)")


if __name__ == "__main__":
    main()
