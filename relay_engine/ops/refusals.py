"""The one error an operation raises when an operator's request cannot apply."""

from __future__ import annotations


class Refused(ValueError):
    """The request names something that does not exist, or that cannot change now; the
    message says which, in words the operator sees as the command's outcome."""
