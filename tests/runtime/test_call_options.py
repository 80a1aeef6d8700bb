"""The per-call options are one class, ``CallOptions``: ``Agent.stream`` and
``Agent.generate`` take their keywords, types and defaults from it, for mypy as
at run time."""

from __future__ import annotations

import inspect
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, assert_type

import attrs
import pytest

import procession
from procession import Agent, AgentResult, ConfigurationError
from procession.runtime._options import CALL_OPTIONS, CallOptions
from procession.testing import ScriptedModel

UNTYPED: frozenset[str] = frozenset({"tool_choice"})
"""Options that take any value (as the agent's own ``tool_choice`` does)."""


@pytest.mark.parametrize("method", [Agent.stream, Agent.generate])
def test_the_signature_is_spelled_from_call_options(method: Any) -> None:
    """What ``help()`` shows: ``self``, ``messages`` and each field of
    ``CallOptions`` as a keyword, with its type and default."""
    parameters = list(inspect.signature(method).parameters.values())
    assert [p.name for p in parameters[:2]] == ["self", "messages"]
    fields = attrs.fields(CallOptions)
    assert [(p.name, p.kind, p.annotation, p.default) for p in parameters[2:]] == [
        (f.name, inspect.Parameter.KEYWORD_ONLY, f.type, f.default) for f in fields
    ]
    assert tuple(f.name for f in fields) == CALL_OPTIONS


def test_generates_docstring_names_every_option() -> None:
    doc = Agent.generate.__doc__ or ""
    assert [name for name in CALL_OPTIONS if f"``{name}``" not in doc] == []


def test_every_unknown_keyword_is_named_and_nothing_runs() -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(id="a", model=model)
    options: dict[str, Any] = {"max_stepz": 3, "max_steps": 2, "modle": "x"}
    with pytest.raises(
        TypeError,
        match=r"^Agent\.generate\(\) got unexpected keyword argument\(s\) max_stepz, "
        r"modle; the per-call options are: input_processors, .*, "
        r"approval_ttl, durable$",
    ):
        agent.generate("hi", **options).close()  # (raised before it exists)
    assert model.calls == []


def test_a_mistyped_option_is_flagged_by_mypy_and_refused_at_call_time() -> None:
    """The ``type: ignore`` comments are the mypy half: CI runs mypy strict
    (``warn_unused_ignores``) over the tests, so each line fails the build
    once mypy no longer flags the value."""
    agent = Agent(id="a", model=ScriptedModel(["hi"]))
    with pytest.raises(ConfigurationError, match=r"^max_steps must be an int >= 1"):
        agent.stream("hi", max_steps="3")  # type: ignore[arg-type]  # the mistyped value under test
    with pytest.raises(ConfigurationError, match=r"^execution_mode must be"):
        agent.generate("hi", execution_mode="warp")  # type: ignore[arg-type,unused-coroutine]  # raises before a coroutine exists
    with pytest.raises(ConfigurationError, match=r"^idle_timeout must be a positive"):
        agent.stream("hi", idle_timeout="5")  # type: ignore[arg-type]  # the mistyped value under test
    pending = assert_type(
        agent.generate("hi", max_steps=2, model_settings={"temperature": 0}),
        Coroutine[Any, Any, AgentResult],
    )
    pending.close()  # never awaited: nothing ran


def test_mypy_checks_every_keyword_of_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each option but the untyped ones, given a value of the wrong type, is a
    mypy error naming it, in both methods; an unknown keyword is one too."""
    api = pytest.importorskip("mypy.api", reason="mypy comes with the dev extra")
    lines = [
        "from procession import Agent",
        "from procession.testing import ScriptedModel",
        'agent = Agent(id="a", model=ScriptedModel(["hi"]))',
    ]
    lines += [
        f'agent.{method}("hi", {name}=object())'
        for method in ("stream", "generate")
        for name in CALL_OPTIONS
    ]
    lines.append('agent.stream("hi", max_stepz=3)')
    snippet = tmp_path / "snippet.py"
    snippet.write_text("\n".join(lines) + "\n")
    # The package's own directory on mypy's path: an editable install's import
    # hook is invisible to mypy.
    monkeypatch.setenv("MYPYPATH", str(Path(procession.__file__).parents[1]))
    out, _, _ = api.run(
        [
            "--strict",
            "--config-file=",
            "--no-incremental",
            "--cache-dir=" + str(tmp_path / "cache"),
            "--disable-error-code=unused-coroutine",
            "--hide-error-context",
            str(snippet),
        ]
    )
    flagged = {
        (method, name)
        for method in ("stream", "generate")
        for name in CALL_OPTIONS
        if f'Argument "{name}" to "{method}" of "Agent" has incompatible type '
        f'"object"' in out
    }
    assert flagged == {
        (method, name)
        for method in ("stream", "generate")
        for name in CALL_OPTIONS
        if name not in UNTYPED
    }, out
    assert 'Unexpected keyword argument "max_stepz" for "stream"' in out
