"""The pytest plugin, as a user meets it: a test file of theirs run by pytest
(``pytester``), with the plugin loaded from its ``pytest11`` entry point."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The user's session, strict as ours: unknown markers and ini keys fail."""
    return pytester.runpytest("-p", "no:cacheprovider", "--strict-markers", *args)


def test_the_plugin_is_a_pytest11_entry_point() -> None:
    found = {
        ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")
    }
    assert found["procession"] == "procession.testing._pytest_plugin"


def test_an_async_test_runs_under_trio_on_an_autojump_clock(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import trio
        import trio.testing

        async def test_an_hour_passes_at_once():
            # Checked before sleeping: on the real clock this would take an hour.
            assert isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)
            start = trio.current_time()
            await trio.sleep(3600)
            assert trio.current_time() - start == 3600

        def test_sync_tests_are_left_as_they_are():
            assert trio.lowlevel.in_trio_run() is False
        """
    )
    run(pytester).assert_outcomes(passed=2)


def test_without_the_plugin_the_same_test_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        async def test_async():
            pass
        """
    )
    result = run(pytester, "-p", "no:procession", "-p", "no:anyio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*async def functions are not natively supported*"])


def test_the_marker_opts_out_to_the_real_clock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import trio
        import trio.testing

        @pytest.mark.procession_real_clock
        async def test_real():
            assert not isinstance(
                trio.lowlevel.current_clock(), trio.testing.MockClock
            )
            await trio.sleep(0.001)
        """
    )
    run(pytester).assert_outcomes(passed=1)
    run(pytester, "--markers").stdout.fnmatch_lines(
        ["@pytest.mark.procession_real_clock*"]
    )


def test_a_clock_fixture_is_the_runs_clock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import trio
        import trio.testing

        @pytest.fixture
        def slow_clock():
            return trio.testing.MockClock(rate=0, autojump_threshold=0.5)

        async def test_autojump(autojump_clock):
            assert trio.lowlevel.current_clock() is autojump_clock

        async def test_own_clock(slow_clock):
            assert trio.lowlevel.current_clock() is slow_clock

        @pytest.mark.procession_real_clock
        async def test_a_requested_clock_beats_the_marker(autojump_clock):
            assert trio.lowlevel.current_clock() is autojump_clock

        async def test_two_clocks(autojump_clock, slow_clock):
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*takes 2 clock fixtures; a trio run has one clock*"])


def test_real_clock_fixtures_run_on_the_real_clock(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        procession_real_clock_fixtures = database
        """
    )
    pytester.makepyfile(
        """
        import pytest
        import trio
        import trio.testing

        def on_mock_clock():
            return isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)

        @pytest.fixture
        def database():
            return "db"

        @pytest.fixture
        def uses_database(database):
            return database

        async def test_fake_provider(fake_provider):
            assert not on_mock_clock()
            async with fake_provider([]) as server:
                assert server.base_url.startswith("http://127.0.0.1:")

        async def test_a_named_fixture(database):
            assert not on_mock_clock()

        async def test_through_another_fixture(uses_database):
            assert not on_mock_clock()

        async def test_others_stay_virtual():
            assert on_mock_clock()
        """
    )
    run(pytester, "--strict-config").assert_outcomes(passed=4)


def test_the_projects_own_tryfirst_runner_wins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import functools
        import inspect
        import pytest
        import trio

        RUNS = []

        @pytest.hookimpl(tryfirst=True)
        def pytest_pyfunc_call(pyfuncitem):
            if not inspect.iscoroutinefunction(pyfuncitem.obj):
                return None
            RUNS.append(pyfuncitem.name)
            names = pyfuncitem._fixtureinfo.argnames
            kwargs = {n: pyfuncitem.funcargs[n] for n in names}
            trio.run(functools.partial(pyfuncitem.obj, **kwargs))  # the real clock
            return True
        """
    )
    pytester.makepyfile(
        """
        import trio
        import trio.testing
        from conftest import RUNS

        BODY = []

        async def test_async():
            BODY.append(1)
            assert not isinstance(
                trio.lowlevel.current_clock(), trio.testing.MockClock
            )

        def test_it_ran_once_and_by_the_project():
            assert RUNS == ["test_async"]
            assert BODY == [1]
        """
    )
    # The second test reads what the first left: keep file order.
    run(pytester, "-p", "no:randomly").assert_outcomes(passed=2)


# A stand-in for pytest-asyncio / anyio / pytest-trio: a plugin at default
# priority loaded with -p, so registered before procession and asked after it;
# it runs its tests with asyncio, where trio would fail them.
OTHER_RUNNER = """
import asyncio
import pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "{marker}: another plugin's test")

def pytest_pyfunc_call(pyfuncitem):
    if pyfuncitem.get_closest_marker("{marker}") is None and (
        "anyio_backend" not in pyfuncitem.funcargs
    ):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{{n: pyfuncitem.funcargs[n] for n in names}}))
    return True
"""


@pytest.mark.parametrize("marker", ["asyncio", "anyio", "trio"])
def test_other_async_plugins_tests_are_left_to_them(
    pytester: pytest.Pytester, marker: str
) -> None:
    pytester.makepyfile(other_runner=OTHER_RUNNER.format(marker=marker))
    pytester.makepyfile(
        f"""
        import asyncio
        import pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.{marker}
        async def test_marked():
            await asyncio.sleep(0)

        async def test_taking_anyio_backend(anyio_backend):
            await asyncio.sleep(0)
        """
    )
    pytester.syspathinsert()
    result = run(pytester, "-p", "other_runner", "-p", "no:anyio")
    result.assert_outcomes(passed=2)


def test_the_plugin_imports_with_the_core_install_alone() -> None:
    script = textwrap.dedent(
        """
        import sys
        for name in ("hypothesis", "h11"):
            sys.modules[name] = None  # import fails, as without the testing extra
        import procession.testing._pytest_plugin
        print(sorted(n for n in sys.modules if n.startswith("procession.testing.")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = done.stdout.strip()
    assert "procession.testing._pytest_plugin" in loaded
    assert "fake_provider" not in loaded
    assert "strategies" not in loaded


def test_fake_provider_without_h11_says_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    test = pytester.makepyfile(
        """
        async def test_needs_the_server(fake_provider):
            pass
        """
    )
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["h11"] = None
        import pytest
        sys.exit(pytest.main([{str(test)!r}, "-p", "no:cacheprovider"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stdout
    assert (
        "fake_provider fixture needs the testing extra: "
        'pip install "procession[testing]"' in done.stdout
    )


def test_a_users_processor_test_file_runs_with_pytest_alone(
    pytester: pytest.Pytester,
) -> None:
    """The whole kit from a user's side: fixtures, the checks, a fault. The file
    is the example of docs/testing.md (once the README's), run as written."""
    readme = pathlib.Path(__file__).resolve().parents[2] / "docs" / "testing.md"
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.DOTALL)
    [user_file] = [b for b in blocks if "assert_split_invariant(" in b]
    pytester.makepyfile(test_redactor=user_file)
    run(pytester).assert_outcomes(passed=4)
