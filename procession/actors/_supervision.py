"""Supervision helpers shared by the kernel's nurseries and the run's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["unwrapping_a_lone_exception"]


@contextmanager
def unwrapping_a_lone_exception() -> Iterator[None]:
    """Around one of our nurseries: a group holding a single exception (the
    user's own, from the block; the source's, from the reader task; a supervisor
    task's, already unwrapped) comes out as that exception, as in fused mode,
    never inside an ExceptionGroup of our making (SPEC §2.7). Groups of several
    (e.g. ``Cancelled`` from an outer scope, in every task) are left alone."""
    escaped: BaseException | None = None
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        escaped = group.exceptions[0]
    if escaped is not None:
        # Raising it here would make whatever is being handled its __context__
        # (the group, or the Cancelled that ended the block); keep its own.
        context = escaped.__context__
        try:
            raise escaped
        finally:
            escaped.__context__ = context
