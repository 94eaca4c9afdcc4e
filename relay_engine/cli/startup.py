"""How a ``relay`` or ``relay-tui`` process starts: its imports untouched by the garbage
collector.

The imports make some 100,000 objects (SQLAlchemy's mappers, pydantic's schemas, the
tables) that live as long as the process. Python's cyclic collector walks all of them in
every full collection while the imports run and once more at exit, which cost ``relay
status`` about a third of its time (960 → 680 ms of CPU for the imports and exit alone,
2 cores, measured side by side). Frozen, they are left out of every collection after; what
a command makes afterwards is collected as usual. The fork server does the same for its
forks (:mod:`relay_engine.agents.forkserver`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def imports_frozen() -> Iterator[None]:
    """No collection while the body imports; what it imported is frozen on the way out,
    even when the body fails (a command that raises still exits fast)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
