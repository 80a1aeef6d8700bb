"""The pytest plugin of procession (the ``pytest11`` entry point ``procession``):
``async def`` tests run under trio, and fixtures for testing processors.

Installed with procession, it loads in every pytest session of the environment
(``-p no:procession`` turns it off). What it does:

* An ``async def test_...`` runs with ``trio.run`` on
  ``trio.testing.MockClock(autojump_threshold=0)``: whenever every task is
  blocked the clock jumps to the next deadline, so ``trio.sleep(3600)``, retry
  back-offs and timeouts take no real time and are exact.
* A test that takes a fixture whose value is a ``trio.abc.Clock`` (such as
  ``autojump_clock``) runs on that clock.
* ``@pytest.mark.procession_real_clock`` runs a test on the real clock, and so do
  tests that use ``fake_provider`` (or a fixture named in the ini option
  ``procession_real_clock_fixtures``): a virtual clock would jump past every
  deadline while a socket or a thread is busy.
* It acts only through ``pytest_pyfunc_call`` at default priority and never
  rewrites a test function, so a project's own runner (a ``tryfirst`` hook in a
  conftest) wins, and it leaves alone the tests other async plugins own: those
  marked ``asyncio``, ``anyio`` or ``trio`` (pytest-trio), or taking
  ``anyio_backend``.

Fixtures: ``autojump_clock``, ``scripted_model`` (makes a ``ScriptedModel``),
``fake_provider`` (opens the loopback fake provider; needs the ``testing``
extra) and ``collect_stream`` (runs an agent, returns its chunks and result).

This module imports with the core install alone (trio, attrs, cattrs): the
fake provider's ``h11`` is imported only when the fixture is used.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from ._collect import collect_stream as _collect_stream
from ._script import ScriptedTurn
from ._scripted import ScriptedModel

if TYPE_CHECKING:
    from .fake_provider import FakeProvider, Turn

__all__ = [
    "REAL_CLOCK_FIXTURES",
    "REAL_CLOCK_MARKER",
    "autojump_clock",
    "collect_stream",
    "fake_provider",
    "pytest_addoption",
    "pytest_configure",
    "pytest_pyfunc_call",
    "scripted_model",
]

REAL_CLOCK_MARKER = "procession_real_clock"
REAL_CLOCK_FIXTURES = frozenset({"fake_provider"})
"""Fixtures that need the real clock (they wait on sockets or threads)."""
_REAL_CLOCK_INI = "procession_real_clock_fixtures"
# Markers of the async plugins whose tests are theirs to run.
_OTHER_RUNNERS = ("asyncio", "anyio", "trio")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _REAL_CLOCK_INI,
        "fixtures whose tests the procession plugin runs on the real clock "
        "(besides fake_provider), e.g. a database fixture",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{REAL_CLOCK_MARKER}: run this async test on the real clock instead of "
        f"procession's autojump MockClock",
    )


def _belongs_elsewhere(item: pytest.Function) -> bool:
    return (
        any(item.get_closest_marker(name) is not None for name in _OTHER_RUNNERS)
        or "anyio_backend" in item.funcargs
    )


def _clock_for(item: pytest.Function, kwargs: dict[str, Any]) -> trio.abc.Clock | None:
    """The clock a test runs on (None: trio's real clock)."""
    clocks = [value for value in kwargs.values() if isinstance(value, trio.abc.Clock)]
    if len(clocks) > 1:
        pytest.fail(
            f"{item.nodeid} takes {len(clocks)} clock fixtures; a trio run has one "
            f"clock, take one of them",
            pytrace=False,
        )
    if clocks:
        return clocks[0]
    if item.get_closest_marker(REAL_CLOCK_MARKER) is not None:
        return None
    real = REAL_CLOCK_FIXTURES | set(item.config.getini(_REAL_CLOCK_INI))
    if real.intersection(item.fixturenames):
        return None
    return trio.testing.MockClock(autojump_threshold=0)


def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test with ``trio.run`` on the clock ``_clock_for``
    chooses; return None (not ours) for sync tests and other plugins' tests."""
    fn = pyfuncitem.obj
    if not inspect.iscoroutinefunction(fn) or _belongs_elsewhere(pyfuncitem):
        return None
    kwargs = {
        # pytest's own fixture names for the test (pytest-trio reads them too).
        name: pyfuncitem.funcargs[name]
        for name in pyfuncitem._fixtureinfo.argnames  # noqa: SLF001
    }
    trio.run(functools.partial(fn, **kwargs), clock=_clock_for(pyfuncitem, kwargs))
    return True


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """A clock that jumps to the next deadline whenever every task is blocked."""
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture
def scripted_model() -> Callable[..., ScriptedModel]:
    """``scripted_model(turns, provider=..., model_id=...)`` makes a
    ``ScriptedModel`` (see ``procession.testing.ScriptedModel``)."""

    def make(turns: Iterable[ScriptedTurn], **options: str) -> ScriptedModel:
        return ScriptedModel(list(turns), **options)

    return make


@pytest.fixture
def fake_provider() -> Callable[..., AbstractAsyncContextManager[FakeProvider]]:
    """``async with fake_provider([...]) as server:``, the loopback fake provider
    (``procession.testing.fake_provider.open_fake_provider``, same arguments).

    A factory the test enters, not a served fixture: pytest runs fixtures
    outside the test's trio run, and a server needs a nursery inside it. The
    test runs on the real clock (sockets). Needs ``procession[testing]``.
    """
    try:
        from .fake_provider import open_fake_provider
    except ImportError as exc:
        pytest.fail(
            f"the fake_provider fixture needs the testing extra: "
            f'pip install "procession[testing]" ({exc})',
            pytrace=False,
        )

    def open_server(
        script: Iterable[Turn] = (), **options: bool
    ) -> AbstractAsyncContextManager[FakeProvider]:
        return open_fake_provider(script, **options)

    return open_server


@pytest.fixture
def collect_stream() -> Callable[..., Any]:
    """``await collect_stream(agent, messages, **options)``: the run read to its
    end, as a ``CollectedRun`` (``chunks``, ``result``, ``text``, ``types``)."""
    return _collect_stream
