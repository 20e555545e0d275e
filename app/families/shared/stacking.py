"""The state of the rows stepping together, stacked once and kept across steps (both batched engines).

Each engine stacks its rows' sampling state into ``[B, ...]`` tensors (its own ``Stacked``). While the same
rows step in the same order the stack is kept; when the batch changes, the old stack writes its state
back into its rows and the new rows are stacked anew.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

R = TypeVar("R")  # a row


class Stack(Protocol):
    """A stack of rows' state that can write that state back into its rows."""

    def write_back(self) -> None: ...


S = TypeVar("S", bound=Stack)


class Restack(Generic[R, S]):
    """``restack(rows)``: the current stack when ``rows`` are its rows in its order; else the current one
    written back and ``make(rows)``."""

    def __init__(self, make: Callable[[list[R]], S]) -> None:
        self._make = make
        self._stack: S | None = None
        self._rows: list[R] = []

    def __call__(self, rows: list[R]) -> S:
        same = len(rows) == len(self._rows) and all(a is b for a, b in zip(rows, self._rows, strict=True))
        if self._stack is not None and same:
            return self._stack
        if self._stack is not None:
            self._stack.write_back()
        self._stack, self._rows = self._make(rows), list(rows)
        return self._stack
