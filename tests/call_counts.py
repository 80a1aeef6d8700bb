"""Counting Python calls, for tests that pin what a path costs (a count, not
a timing: the same on a loaded machine)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def python_calls_in(prefix: str, fn: Callable[[], Any]) -> int:
    """Python function calls made in files whose path starts with ``prefix``
    (a module's ``__file__``, or a package's directory) while ``fn()`` runs."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename.startswith(prefix):
            calls += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls
