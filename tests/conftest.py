"""Test configuration: run ``async def`` tests under trio, Hypothesis profiles."""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, settings

# Profiles: "dev" for local runs, "ci" (chosen when CI=true) bounds the example
# count so the suite fits CI's budget on 2 cores; HYPOTHESIS_PROFILE overrides.
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
# A long hunt, by hand: HYPOTHESIS_PROFILE=thorough pytest tests/actors tests/wire
settings.register_profile("thorough", max_examples=3000, deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
)


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """A clock that jumps to the next deadline whenever every task is blocked."""
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests with ``trio.run`` (a clock fixture, if any, is
    used as the run's clock)."""
    fn = pyfuncitem.obj
    if not inspect.iscoroutinefunction(fn):
        return None
    kwargs: dict[str, Any] = {
        name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames
    }
    clocks = [v for v in kwargs.values() if isinstance(v, trio.abc.Clock)]
    if len(clocks) > 1:
        raise ValueError("too many clocks spoil the broth")
    trio.run(functools.partial(fn, **kwargs), clock=clocks[0] if clocks else None)
    return True
