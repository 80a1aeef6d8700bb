"""``register_processors``: lanes, ids, hook detection, ``processor_index`` and
the ``InputProcessor`` / ``OutputProcessor`` / ``ErrorProcessor`` protocols."""

from __future__ import annotations

import types
from typing import Any

import attrs
import pytest

from procession import ConfigurationError, DuplicateProcessorIdError
from procession.processors import (
    ErrorProcessor,
    InputProcessor,
    OutputProcessor,
    Processor,
    ProcessorViolation,
    ProcessorWarning,
)
from procession.processors._contract import HOOK_NAMES
from procession.processors._registration import HookSpec, register_processors
from tests.seed_processors import (
    ContentFilter,
    ErrorRecoveryProcessor,
    LowercaseProcessor,
    RedactToolResult,
    WordCounter,
)


class Named(Processor):
    """A processor with a given id and a sync ``process_input``."""

    def __init__(self, id: str) -> None:
        self.id = id

    def process_input(self, args: Any) -> None:
        return None


class AsyncHook:
    """A callable object whose ``__call__`` is async."""

    async def __call__(self, args: Any) -> None:
        return None


class Mixed(Processor):
    """Sync, async and async-callable hooks."""

    id = "mixed"

    def process_input(self, args: Any) -> None:
        return None

    async def process_output_stream(self, args: Any) -> Any:
        return args.part

    process_output_step = AsyncHook()


class AllLanes(Named):
    """A processor with a hook for each lane."""

    def process_output_stream(self, args: Any) -> Any:
        return args.part

    def process_api_error(self, args: Any) -> None:
        return None


# --- lanes and identity ---------------------------------------------------------


def test_empty_registration_has_no_specs() -> None:
    """No processors give empty lanes."""
    registered = register_processors()
    assert (registered.input, registered.output, registered.error) == ((), (), ())
    assert registered.all == ()


def test_same_instance_in_several_lanes_gets_one_spec() -> None:
    """One instance in the input and output lanes is one spec (one state)."""
    content_filter = ContentFilter(["secret"])
    registered = register_processors(input=[content_filter], output=[content_filter])
    assert len(registered.all) == 1
    spec = registered.all[0]
    assert registered.input == (spec,)
    assert registered.output == (spec,)
    assert spec.processor is content_filter
    assert spec.id == "content-filter"
    assert set(spec.hooks) == {"process_input", "process_output_stream"}


def test_two_instances_with_the_same_id_are_rejected() -> None:
    """Two different instances sharing an id raise DuplicateProcessorIdError."""
    first, second = ContentFilter(["a"]), ContentFilter(["b"])
    with pytest.raises(
        DuplicateProcessorIdError,
        match="two different processors share the id 'content-filter'",
    ) as info:
        register_processors(input=[first], output=[second])
    assert info.value.processor_id == "content-filter"


def test_duplicate_ids_within_one_lane_are_rejected() -> None:
    """Duplicate ids are rejected inside a lane too."""
    with pytest.raises(DuplicateProcessorIdError, match="share the id 'same'"):
        register_processors(input=[Named("same"), Named("other"), Named("same")])


def test_same_instance_twice_in_one_lane_is_rejected() -> None:
    """Listing one instance twice in a lane is a ConfigurationError."""
    counter = WordCounter()
    with pytest.raises(
        ConfigurationError,
        match="processor 'word-counter' appears twice in one lane; list it once",
    ):
        register_processors(output=[counter, counter])


def test_processor_index_is_set_in_merged_order() -> None:
    """processor_index is the position in input, output, error order, each
    instance counted once."""
    a, b, c, d = AllLanes("a"), AllLanes("b"), AllLanes("c"), ErrorRecoveryProcessor()
    registered = register_processors(input=[a, b], output=[c, a], error=[d, b])
    assert [spec.id for spec in registered.all] == ["a", "b", "c", "error-recovery"]
    assert [p.processor_index for p in (a, b, c, d)] == [0, 1, 2, 3]
    assert [spec.index for spec in registered.all] == [0, 1, 2, 3]
    assert [spec.id for spec in registered.output] == ["c", "a"]
    assert [spec.id for spec in registered.error] == ["error-recovery", "b"]


def test_processor_index_is_reset_on_each_registration() -> None:
    """A shared processor takes its index from the latest registration."""
    counter = WordCounter()
    first = types.SimpleNamespace(id="first", process_output_result=lambda args: None)
    register_processors(output=[first, counter])
    assert counter.processor_index == 1
    register_processors(output=[counter])
    assert counter.processor_index == 0


def test_any_object_with_an_id_and_a_hook_is_a_processor() -> None:
    """Subclassing Processor is optional; the index is set on plain objects."""
    plain = types.SimpleNamespace(id="plain", process_output_result=lambda args: None)
    registered = register_processors(output=[plain])
    assert registered.output[0].id == "plain"
    assert registered.output[0].name == "plain"
    assert plain.processor_index == 0


def test_a_frozen_processor_still_registers() -> None:
    """A processor that cannot take ``processor_index`` keeps it on its spec."""

    @attrs.frozen
    class Frozen:
        id: str = "frozen"

        def process_input(self, args: Any) -> None:
            return None

    frozen = Frozen()
    registered = register_processors(input=[Named("x"), frozen])
    assert registered.input[1].index == 1
    assert not hasattr(frozen, "processor_index")


# --- what a spec records -------------------------------------------------------


def test_spec_records_name_policy_and_flags() -> None:
    """name, on_error, process_data_parts and on_violation are read once."""
    violations: list[ProcessorViolation] = []

    class Moderator(Processor):
        id = "moderator"
        process_data_parts = True
        on_error = "block"

        def process_output_stream(self, args: Any) -> Any:
            return args.part

        def on_violation(self, violation: ProcessorViolation) -> None:
            violations.append(violation)

    moderator = Moderator()
    moderator.name = "Moderator"
    spec = register_processors(output=[moderator]).output[0]
    assert (spec.id, spec.name) == ("moderator", "Moderator")
    assert spec.on_error == "block"
    assert spec.process_data_parts is True
    assert spec.on_violation == moderator.on_violation


def test_spec_defaults_for_a_bare_object() -> None:
    """Without the attributes: on_error "raise", no data parts, no on_violation."""
    bare = types.SimpleNamespace(id="bare", process_input=lambda args: None)
    spec = register_processors(input=[bare]).input[0]
    assert spec.on_error == "raise"
    assert spec.process_data_parts is False
    assert spec.on_violation is None


def test_hook_specs_record_sync_and_async_hooks() -> None:
    """Each implemented hook is recorded with whether calling it is async."""
    mixed = Mixed()
    spec = register_processors(input=[mixed], output=[mixed]).all[0]
    assert set(spec.hooks) == {
        "process_input",
        "process_output_stream",
        "process_output_step",
    }
    assert spec.hooks["process_input"] == HookSpec(
        fn=mixed.process_input, is_async=False
    )
    assert spec.hooks["process_output_stream"] == HookSpec(
        fn=mixed.process_output_stream, is_async=True
    )
    assert spec.hooks["process_output_step"].is_async is True
    assert spec.hook("process_input") is spec.hooks["process_input"]
    assert spec.hook("process_api_error") is None


def test_only_the_nine_hooks_are_looked_up() -> None:
    """Methods with other names are not hooks."""

    class Extra(Named):
        def process_everything(self, args: Any) -> None:
            return None

    with pytest.warns(ProcessorWarning, match="process_everything that is not a hook"):
        spec = register_processors(input=[Extra("extra")]).input[0]
    assert set(spec.hooks) == {"process_input"}
    assert set(spec.hooks) <= set(HOOK_NAMES)


def test_a_processor_with_only_process_tool_result_is_an_output_processor() -> None:
    """The seed's RedactToolResult has only process_tool_result; it registers in
    the output lane."""
    redact = RedactToolResult()
    registered = register_processors(output=[redact])
    assert [spec.id for spec in registered.output] == ["redact-tool-result"]
    assert set(registered.output[0].hooks) == {"process_tool_result"}
    assert registered.output[0].hooks["process_tool_result"].is_async is True


@pytest.mark.parametrize(
    ("lanes", "shown"),
    [
        (
            {"output": [LowercaseProcessor()]},
            r"processor 'lowercase' is in output_processors but has none of that "
            r"lane's hooks \(process_output_stream, process_output_step, "
            r"process_output_result, process_tool_result, process_api_error\), so "
            r"it would never run there; it has process_input: put it in "
            r"input_processors",
        ),
        (
            {"input": [WordCounter()]},
            r"processor 'word-counter' is in input_processors but has none of "
            r"that lane's hooks .* it has process_output_stream: put it in "
            r"output_processors",
        ),
        (
            {"error": [Named("err")]},
            r"processor 'err' is in error_processors but has none of that lane's "
            r"hooks \(process_api_error\), .* it has process_input",
        ),
    ],
    ids=["input-only in output", "output-only in input", "no api hook in error"],
)
def test_a_processor_with_none_of_a_lanes_hooks_is_refused(
    lanes: dict[str, Any], shown: str
) -> None:
    """It would sit in the lane and never run (SPEC §2.12 as revised): refused,
    naming it, the lane's hooks and the hooks it has."""
    with pytest.raises(ConfigurationError, match=shown):
        register_processors(**lanes)


def test_process_api_error_is_accepted_in_every_lane() -> None:
    """An error processor may sit in any lane (consulted input, output, then
    error lane)."""
    recovery = ErrorRecoveryProcessor()
    for lane in ("input", "output", "error"):
        registered = register_processors(**{lane: [recovery]})
        assert [spec.id for spec in getattr(registered, lane)] == ["error-recovery"]


def test_a_processor_class_is_refused_with_a_hint_to_instantiate_it() -> None:
    """Passing the class (it has an id and hooks, as class attributes) would
    fail mid-run with a missing-argument TypeError; it is refused at once."""
    with pytest.raises(
        ConfigurationError,
        match=r"output_processors got the class WordCounter, not a processor: "
        r"instantiate it \(WordCounter\(\.\.\.\)\) and pass the instance",
    ):
        register_processors(output=[WordCounter])


def test_a_misspelled_hook_beside_a_valid_one_is_warned_about() -> None:
    """A ``process_*`` method that is not a hook is never called: a
    ProcessorWarning says which hook it probably meant."""

    class Typo(Processor):
        id = "typo"

        def process_output_result(self, args: Any) -> None:
            return None

        def process_output_streams(self, args: Any) -> Any:
            return args.part

    with pytest.warns(ProcessorWarning) as caught:
        spec = register_processors(output=[Typo()]).output[0]
    assert set(spec.hooks) == {"process_output_result"}
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "processor 'typo' has a method process_output_streams that is not a " in (
        message
    )
    assert "did you mean process_output_stream?" in message


def test_a_non_hook_attribute_that_is_not_callable_is_not_warned_about() -> None:
    """``process_data_parts`` and other plain attributes are not methods."""
    plain = types.SimpleNamespace(
        id="plain",
        process_data_parts=True,
        process_notes="a string",
        process_output_stream=lambda args: args.part,
    )
    register_processors(output=[plain])  # filterwarnings=error: no warning


# --- rejected registrations ------------------------------------------------------


def test_a_processor_without_hooks_is_rejected() -> None:
    """No hook at all is a ConfigurationError listing the hooks."""

    class Idle(Processor):
        id = "idle"

    with pytest.raises(
        ConfigurationError,
        match=r"processor 'idle' \(<Idle id='idle'>\) implements none of the hooks "
        r"process_input, process_input_step, ",
    ):
        register_processors(input=[Idle()])


@pytest.mark.parametrize(
    "processor",
    [
        types.SimpleNamespace(process_input=lambda args: None),
        types.SimpleNamespace(id="", process_input=lambda args: None),
        types.SimpleNamespace(id=42, process_input=lambda args: None),
        types.SimpleNamespace(id=None, process_input=lambda args: None),
    ],
    ids=["missing", "empty", "int", "none"],
)
def test_a_processor_without_a_usable_id_is_rejected(processor: object) -> None:
    """The id must be a non-empty str; the message shows the processor."""
    with pytest.raises(
        ConfigurationError,
        match=r"processor namespace\(.*\) has no id; give it a non-empty string "
        r"attribute 'id'",
    ):
        register_processors(output=[processor])


def test_a_bad_on_error_is_rejected() -> None:
    """on_error must be "raise", "pass" or "block"."""
    processor = Named("guard")
    processor.on_error = "ignore"  # type: ignore[assignment]
    with pytest.raises(
        ConfigurationError,
        match="processor 'guard': on_error is 'ignore'; expected one of 'raise', "
        "'pass', 'block'",
    ):
        register_processors(input=[processor])


def test_a_non_callable_hook_is_rejected() -> None:
    """A hook attribute that is not callable is named in the error."""
    processor = types.SimpleNamespace(id="broken", process_output_stream="nope")
    with pytest.raises(
        ConfigurationError,
        match="processor 'broken': process_output_stream is 'nope', which is not "
        "callable",
    ):
        register_processors(output=[processor])


def test_a_non_callable_on_violation_is_rejected() -> None:
    """on_violation, if set, must be callable."""
    processor = types.SimpleNamespace(
        id="alarm", process_input=lambda args: None, on_violation=True
    )
    with pytest.raises(
        ConfigurationError,
        match="processor 'alarm': on_violation is True, not callable",
    ):
        register_processors(input=[processor])


@pytest.mark.parametrize(
    ("lanes", "shown"),
    [
        (
            {"input": "content-filter"},
            "input_processors must be a list of processors, got 'content-filter'",
        ),
        ({"output": b"x"}, "output_processors must be a list of processors, got b'x'"),
        ({"error": 42}, "error_processors must be a list of processors, got 42"),
    ],
)
def test_a_lane_that_is_not_a_list_is_rejected(
    lanes: dict[str, Any], shown: str
) -> None:
    """A str, bytes or non-iterable lane is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match=shown):
        register_processors(**lanes)


def test_a_rejected_registration_names_the_first_problem_only() -> None:
    """Validation stops at the first bad processor, in merged order."""

    class Idle(Processor):
        id = "idle"

    with pytest.raises(ConfigurationError, match="processor 'idle'"):
        register_processors(input=[Named("ok"), Idle()], output=[Named("ok")])


# --- typing protocols ------------------------------------------------------------


@pytest.mark.parametrize(
    ("processor", "is_input", "is_output", "is_error"),
    [
        (LowercaseProcessor(), True, False, False),
        (ContentFilter(["x"]), True, True, False),
        (WordCounter(), False, True, False),
        (RedactToolResult(), False, True, False),
        (ErrorRecoveryProcessor(), False, False, True),
    ],
    ids=["lowercase", "content-filter", "word-counter", "redact", "error-recovery"],
)
def test_runtime_checkable_protocols(
    processor: object, is_input: bool, is_output: bool, is_error: bool
) -> None:
    """isinstance against the seed's processor kinds follows the hooks present."""
    assert isinstance(processor, InputProcessor) is is_input
    assert isinstance(processor, OutputProcessor) is is_output
    assert isinstance(processor, ErrorProcessor) is is_error


def test_protocols_need_an_id() -> None:
    """An object with a hook but no id is not a processor of any kind."""
    no_id = types.SimpleNamespace(
        process_input=lambda args: None, process_api_error=lambda args: None
    )
    assert not isinstance(no_id, InputProcessor)
    assert not isinstance(no_id, ErrorProcessor)
    with_id = types.SimpleNamespace(id="x", process_api_error=lambda args: None)
    assert isinstance(with_id, ErrorProcessor)
