"""How much an operator raises a budget by, as typed: the console's budget dialog and
``relay budget --add/--tokens`` read it alike and say the same about a typo.

``float`` alone takes ``nan``, ``inf`` and ``1e308``; a NaN budget was stored as no
budget at all, and a negative one lowered it.

Pure: no I/O.
"""

from __future__ import annotations

import re

MAX_RAISE_USD = 10_000.0
"""More than this at once is a typo (``1e308``, a misplaced digit), not a budget."""
AMOUNT = re.compile(r"^\d{1,7}(\.\d{1,4})?$|^\.\d{1,4}$")
"""Plain decimal dollars: no exponents, no signs, at most four decimals."""


def parse_dollars(value: str) -> float | str:
    """Dollars to add, or what is wrong with what was typed."""
    text = value.strip().removeprefix("$").replace(",", "")
    if not AMOUNT.match(text):
        return f"“{value.strip()}” is not an amount of dollars: type a number such as 5 or 2.50."
    amount = float(text)
    if amount <= 0:
        return "Type a positive amount: a budget is raised, never lowered, from here."
    if amount < 0.001:
        return "Type at least $0.001: smaller amounts change nothing a run would notice."
    if amount > MAX_RAISE_USD:
        return (
            f"${amount:,.2f} is more than ${MAX_RAISE_USD:,.0f} at once: raise it in steps, "
            "or set budget_usd in the job file."
        )
    return amount


MAX_RAISE_TOKENS = 10**12
"""More than this at once is a typo, not a budget."""


def parse_tokens(value: str) -> int | str:
    """Tokens to add, or what is wrong with what was typed."""
    text = value.strip().replace(",", "").replace("_", "")
    if not (text.isascii() and text.isdigit()):
        return f"“{value.strip()}” is not a number of tokens: type a whole number such as 200000."
    if len(text) > 15 or int(text) > MAX_RAISE_TOKENS:
        return (
            f"{value.strip()} tokens is more than {MAX_RAISE_TOKENS:,} at once: raise it in "
            "steps, or set budget_tokens in the job file."
        )
    if int(text) == 0:
        return "Type a positive number of tokens: a budget is raised, never lowered, from here."
    return int(text)
