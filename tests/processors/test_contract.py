"""The processor contract: ``Processor`` defaults, hook arguments (``abort``,
``report_violation``), the stream writer, the abort signal, the request context,
the ``read_*_result`` normalisers and how hooks are called."""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any

import pytest
import trio
import trio.testing

from procession import (
    MissingFieldError,
    ProcessorContractError,
    TripWire,
    UnknownChunkTypeError,
    WireFormatError,
)
from procession.chunks import DataChunk, data, text_delta
from procession.messages import Message, SystemMessage
from procession.processors import (
    AbortSignal,
    CollectingEmitter,
    HookArgs,
    MessageList,
    ProcessAPIErrorResult,
    ProcessInputResult,
    ProcessInputStepResult,
    ProcessLLMRequestResult,
    Processor,
    ProcessorStreamWriter,
    ProcessorViolation,
    ProcessOutputStreamArgs,
    PromptTextPart,
    PromptUserMessage,
    RequestContext,
)
from procession.processors._calling import call_hook, is_async_hook
from procession.processors._contract import default_abort_reason
from procession.processors._readers import (
    read_api_error_result,
    read_input_step_result,
    read_llm_request_result,
    read_message_result,
)

# --- Processor defaults ------------------------------------------------------------


class Guard(Processor):
    id = "guard"

    def process_input(self, args: Any) -> None:
        return None


def test_processor_name_defaults_to_id() -> None:
    """Without a name, ``name`` is the ``id``."""
    assert Guard().name == "guard"


def test_processor_name_setter_is_per_instance() -> None:
    """Setting ``name`` changes that instance only and leaves ``id`` alone."""
    named, plain = Guard(), Guard()
    named.name = "The Guard"
    assert named.name == "The Guard"
    assert named.id == "guard"
    assert plain.name == "guard"


def test_processor_attribute_defaults() -> None:
    """description None, process_data_parts False, on_error "raise",
    processor_index None."""
    guard = Guard()
    assert guard.description is None
    assert guard.process_data_parts is False
    assert guard.on_error == "raise"
    assert guard.processor_index is None


def test_processor_defaults_can_be_overridden_in_a_subclass() -> None:
    """Class attributes override the defaults."""

    class Collector(Processor):
        id = "collector"
        description = "collects moderation data"
        process_data_parts = True
        on_error = "pass"

    collector = Collector()
    assert (collector.description, collector.process_data_parts) == (
        "collects moderation data",
        True,
    )
    assert collector.on_error == "pass"


def test_processor_repr_shows_class_and_id() -> None:
    """The repr names the class and the id (or says there is none)."""

    class NoId(Processor):
        pass

    assert repr(Guard()) == "<Guard id='guard'>"
    assert repr(NoId()) == "<NoId id='<no id>'>"


# --- HookArgs.abort / report_violation ----------------------------------------


def make_args(**kwargs: Any) -> HookArgs:
    return HookArgs(processor_id="guard", state={}, **kwargs)


def test_abort_raises_tripwire_with_every_field() -> None:
    """``abort(reason, retry=, metadata=)`` raises TripWire carrying them and the
    processor id."""
    metadata = {"qualityScore": 0.4}
    with pytest.raises(TripWire, match="too short") as info:
        make_args().abort("too short", retry=True, metadata=metadata)
    tripwire = info.value
    assert tripwire.reason == "too short"
    assert tripwire.retry is True
    assert tripwire.metadata is metadata
    assert tripwire.processor_id == "guard"


@pytest.mark.parametrize("reason", [None, ""])
def test_abort_without_reason_uses_the_default(reason: str | None) -> None:
    """No (or an empty) reason gives ``Tripwire triggered by <id>``."""
    with pytest.raises(TripWire, match=r"^Tripwire triggered by guard$") as info:
        make_args().abort(reason)
    assert info.value.reason == default_abort_reason("guard")
    assert (info.value.retry, info.value.metadata) == (False, None)


def test_abort_never_returns_even_under_except_exception() -> None:
    """Code after ``abort`` does not run, and ``except Exception`` in the hook
    does not catch it."""
    reached: list[str] = []

    def hook(args: HookArgs) -> None:
        try:
            args.abort("stop")
            reached.append("after abort")  # type: ignore[unreachable]  # proves abort() never returns
        except Exception:
            reached.append("swallowed")

    with pytest.raises(TripWire, match="stop"):
        hook(make_args())
    assert reached == []


def test_abort_on_a_hook_specific_args_object() -> None:
    """Every hook's args class has ``abort`` (here the per-chunk one)."""
    args = ProcessOutputStreamArgs(
        processor_id="stream-guard", state={}, part=text_delta("x"), stream_parts=[]
    )
    with pytest.raises(TripWire, match="no x") as info:
        args.abort("no x")
    assert info.value.processor_id == "stream-guard"


def test_report_violation_reaches_the_emitter_without_stopping() -> None:
    """``report_violation`` hands a non-blocking ProcessorViolation to the
    emitter and returns."""
    emitter = CollectingEmitter()
    args = make_args(emitter=emitter)
    args.report_violation("possible PII", {"field": "email"})
    args.report_violation("second")
    assert emitter.violations == [
        ProcessorViolation(
            processor_id="guard", message="possible PII", detail={"field": "email"}
        ),
        ProcessorViolation(processor_id="guard", message="second", detail=None),
    ]
    assert emitter.violations[0].blocking is False
    assert emitter.custom == []


def test_report_violation_without_emitter_is_a_no_op() -> None:
    """Outside a run (no emitter) reporting a violation does nothing."""
    args = make_args()
    assert args.emitter is None
    args.report_violation("ignored")


def test_hook_args_defaults() -> None:
    """retry_count 0, a fresh RequestContext, no writer, signal or tracing."""
    args, other = make_args(), make_args()
    assert args.retry_count == 0
    assert args.request_context == RequestContext()
    assert args.request_context is not other.request_context
    assert (args.writer, args.abort_signal, args.tracing_context) == (None, None, None)


# --- ProcessorStreamWriter ------------------------------------------------------


async def test_writer_custom_emits_a_chunk_object_and_checkpoints() -> None:
    """``await writer.custom(chunk)`` emits the chunk under the processor's id
    and checkpoints."""
    emitter = CollectingEmitter()
    writer = ProcessorStreamWriter(emitter, "moderator")
    chunk = data("moderation", {"level": "warn"})
    with trio.testing.assert_checkpoints():
        await writer.custom(chunk)
    assert emitter.custom == [("moderator", chunk)]
    assert emitter.custom[0][1] is chunk


async def test_writer_custom_accepts_the_seeds_wire_dicts() -> None:
    """Wire dicts become chunks; runId/from on a data chunk land in ``extra``,
    ``transient`` is a property of the chunk."""
    emitter = CollectingEmitter()
    writer = ProcessorStreamWriter(emitter, "moderator")
    await writer.custom(
        {
            "type": "data-moderation",
            "runId": "run-1",
            "from": "AGENT",
            "data": {"level": "warn", "reason": "Possibly unsafe"},
        }
    )
    await writer.custom(
        {"type": "data-progress", "data": {"status": "Processing"}, "transient": True}
    )
    assert [chunk for _, chunk in emitter.custom] == [
        DataChunk(
            type="data-moderation",
            data={"level": "warn", "reason": "Possibly unsafe"},
            extra={"runId": "run-1", "from": "AGENT"},
        ),
        DataChunk(type="data-progress", data={"status": "Processing"}, transient=True),
    ]


async def test_writer_custom_nowait_emits_without_checkpointing() -> None:
    """``custom_nowait`` is synchronous, for sync hooks."""
    emitter = CollectingEmitter()
    writer = ProcessorStreamWriter(emitter, "moderator")
    with trio.testing.assert_no_checkpoints():
        writer.custom_nowait({"type": "data-progress", "data": 1})
    assert emitter.custom == [("moderator", DataChunk(type="data-progress", data=1))]


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        ({"type": "progress", "data": 1}, UnknownChunkTypeError, "'progress'"),
        ({"data": 1}, MissingFieldError, "required field 'type'"),
        ({"type": "text-delta"}, MissingFieldError, "required field 'payload'"),
    ],
)
async def test_writer_custom_rejects_a_bad_dict(
    bad: dict[str, Any], error: type[WireFormatError], match: str
) -> None:
    """A dict that is not a chunk raises a WireFormatError naming the problem
    and emits nothing."""
    emitter = CollectingEmitter()
    writer = ProcessorStreamWriter(emitter, "moderator")
    with pytest.raises(error, match=match):
        await writer.custom(bad)
    with pytest.raises(WireFormatError, match=match):
        writer.custom_nowait(bad)
    assert emitter.custom == []


@pytest.mark.parametrize(
    ("forged", "named"),
    [
        (
            {"type": "tripwire", "payload": {"reason": "forged", "retry": False}},
            "a 'tripwire' chunk",
        ),
        ({"type": "step-start", "payload": {}}, "a 'step-start' chunk"),
        (text_delta("injected"), "a 'text-delta' chunk"),
        (42, "42, which is not a chunk"),
    ],
)
async def test_writer_custom_accepts_only_data_chunks(forged: Any, named: str) -> None:
    """Only ``data-*`` chunks are custom output: a processor that forwards JSON
    from a tool or the model cannot forge the run's own chunks (issue 9 §2.2).
    Anything else is a ProcessorContractError naming the processor and the
    type, and nothing is emitted."""
    emitter = CollectingEmitter()
    writer = ProcessorStreamWriter(emitter, "forwarder")
    expected = (
        rf"processor 'forwarder': writer.custom accepts only 'data-\*' chunks, "
        rf"got {named}"
    )
    with pytest.raises(ProcessorContractError, match=expected) as raised:
        await writer.custom(forged)
    assert raised.value.processor_id == "forwarder"
    with pytest.raises(ProcessorContractError, match=expected):
        writer.custom_nowait(forged)
    assert emitter.custom == []


def test_writer_repr_names_the_processor() -> None:
    """The writer's repr shows whose it is."""
    writer = ProcessorStreamWriter(CollectingEmitter(), "moderator")
    assert repr(writer) == "ProcessorStreamWriter(processor_id='moderator')"


# --- AbortSignal ------------------------------------------------------------------


async def test_abort_signal_starts_clear() -> None:
    """A new signal is not aborted and has no reason."""
    signal = AbortSignal()
    assert signal.aborted is False
    assert signal.reason is None
    assert repr(signal) == "AbortSignal(aborted=False, reason=None)"


async def test_abort_signal_set_keeps_the_first_reason() -> None:
    """``set`` marks it aborted; a second ``set`` does not change the reason."""
    signal = AbortSignal()
    signal.set("client disconnected")
    signal.set("later reason")
    assert signal.aborted is True
    assert signal.reason == "client disconnected"
    assert repr(signal) == "AbortSignal(aborted=True, reason='client disconnected')"


async def test_abort_signal_wait_parks_until_set() -> None:
    """``await signal.wait()`` returns only once the signal is set."""
    signal = AbortSignal()
    woke: list[str | None] = []

    async def waiter() -> None:
        await signal.wait()
        woke.append(signal.reason)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == []
        signal.set("cancelled")
    assert woke == ["cancelled"]


# --- RequestContext -------------------------------------------------------------


def test_request_context_get_and_set() -> None:
    """Mastra's ``get``/``set`` spelling on a plain dict."""
    context = RequestContext({"blockedWords": ["secret"]})
    context.set("userTier", "pro")
    assert context.get("blockedWords") == ["secret"]
    assert context.get("userTier") == "pro"
    assert context.get("missing") is None
    assert context.get("missing", []) == []
    assert context == {"blockedWords": ["secret"], "userTier": "pro"}


@pytest.mark.parametrize(
    ("items", "thread", "resource"),
    [
        ({"thread_id": "t1", "resource_id": "r1"}, "t1", "r1"),
        ({"threadId": "t2", "resourceId": "r2"}, "t2", "r2"),
        ({"threadId": 3, "resourceId": None}, None, None),
        ({}, None, None),
    ],
)
def test_request_context_thread_and_resource_ids(
    items: dict[str, Any], thread: str | None, resource: str | None
) -> None:
    """thread_id/resource_id read snake or camelCase keys; non-str is None."""
    context = RequestContext(items)
    assert (context.thread_id, context.resource_id) == (thread, resource)


# --- read_input_step_result --------------------------------------------------


def test_read_input_step_result_passes_none_results_lists_and_the_list() -> None:
    """None, a result object, a list and the message_list come back as they are."""
    ml = MessageList()
    result = ProcessInputStepResult(model="openai/gpt-5-mini")
    messages = [Message.user("hi", id="u1")]
    assert read_input_step_result(None, "p") is None
    assert read_input_step_result(result, "p") is result
    assert read_input_step_result(messages, "p") is messages
    assert read_input_step_result(ml, "p", message_list=ml) is ml


def test_read_input_step_result_reads_snake_case_dicts() -> None:
    """A dict of the result's fields becomes a ProcessInputStepResult."""
    assert read_input_step_result(
        {"model": "openai/gpt-5-mini", "tool_choice": "none", "active_tools": ["a"]},
        "p",
    ) == ProcessInputStepResult(
        model="openai/gpt-5-mini", tool_choice="none", active_tools=["a"]
    )
    assert read_input_step_result({}, "p") == ProcessInputStepResult()


def test_read_input_step_result_reads_camel_case_dicts() -> None:
    """The seed's camelCase keys map to the snake_case fields."""
    ml = MessageList()
    system = [SystemMessage(content="be brief")]
    assert read_input_step_result(
        {
            "toolChoice": "required",
            "activeTools": ["search"],
            "systemMessages": system,
            "providerOptions": {"anthropic": {"cacheControl": True}},
            "modelSettings": {"temperature": 0},
            "structuredOutput": {"schema": {}},
            "messageList": ml,
        },
        "p",
        message_list=ml,
    ) == ProcessInputStepResult(
        tool_choice="required",
        active_tools=["search"],
        system_messages=system,
        provider_options={"anthropic": {"cacheControl": True}},
        model_settings={"temperature": 0},
        structured_output={"schema": {}},
        message_list=ml,
    )


def test_read_input_step_result_rejects_unknown_dict_keys() -> None:
    """An unknown key is an error naming the processor, the key and the
    allowed ones."""
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'dyn': process_input_step returned a dict with the "
        r"unknown key 'modelId'; expected only \['active_tools', ",
    ) as info:
        read_input_step_result({"modelId": "x"}, "dyn")
    assert (info.value.processor_id, info.value.hook) == ("dyn", "process_input_step")


@pytest.mark.parametrize("bad", ["openai/gpt-5", 42, (Message.user("hi"),), True])
def test_read_input_step_result_rejects_other_types(bad: object) -> None:
    """Anything else is an error naming the processor and what was expected."""
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'dyn': process_input_step returned .*; expected None, a "
        r"ProcessInputStepResult \(or a dict of its fields\), a list of messages, "
        r"or the message_list",
    ):
        read_input_step_result(bad, "dyn")


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [], "message_list": "ML"},
        {"messages": [], "messageList": "ML"},
        "RESULT",
    ],
)
def test_read_input_step_result_rejects_messages_with_message_list(
    value: object,
) -> None:
    """Returning both ``messages`` and ``message_list`` is an error."""
    ml = MessageList()
    if value == "RESULT":
        value = ProcessInputStepResult(messages=[], message_list=ml)
    else:
        assert isinstance(value, dict)
        value = {k: ml if v == "ML" else v for k, v in value.items()}
    with pytest.raises(
        ProcessorContractError,
        match="processor 'dyn': process_input_step returned both messages and "
        "message_list; return one of them",
    ):
        read_input_step_result(value, "dyn")


@pytest.mark.parametrize("wrap", ["bare", "result", "dict"])
def test_read_input_step_result_rejects_a_different_message_list(wrap: str) -> None:
    """Given the hook's message_list, another MessageList instance is an error."""
    mine, other = MessageList(), MessageList()
    value: object = {
        "bare": other,
        "result": ProcessInputStepResult(message_list=other),
        "dict": {"messageList": other},
    }[wrap]
    with pytest.raises(
        ProcessorContractError,
        match="processor 'dyn': process_input_step returned a different "
        "MessageList; modify the message_list passed in",
    ):
        read_input_step_result(value, "dyn", message_list=mine)


# --- read_api_error_result ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "retry"),
    [
        (None, False),
        (ProcessAPIErrorResult(), False),
        (ProcessAPIErrorResult(retry=True), True),
        ({"retry": True}, True),
        ({"retry": False}, False),
        ({}, False),
    ],
)
def test_read_api_error_result_accepts_valid_values(value: object, retry: bool) -> None:
    """None, a result object and ``{"retry": bool}`` give retry-or-not."""
    assert read_api_error_result(value, "recovery") is retry


@pytest.mark.parametrize(
    "bad",
    [True, {"retry": "yes"}, {"retry": 1}, {"retry": True, "delay": 5}, [True]],
)
def test_read_api_error_result_rejects_invalid_values(bad: object) -> None:
    """Anything else is an error naming the processor and the accepted shapes."""
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'recovery': process_api_error returned .*; expected None, "
        r"ProcessAPIErrorResult\(retry=...\) or \{'retry': bool\}",
    ):
        read_api_error_result(bad, "recovery")


# --- read_llm_request_result --------------------------------------------------------


def test_read_llm_request_result_accepts_valid_values() -> None:
    """None, a result object and ``{"prompt"}`` / ``{"response"}`` dicts."""
    prompt = [PromptUserMessage(content=[PromptTextPart("hi")])]
    response = [text_delta("cached")]
    result = ProcessLLMRequestResult(prompt=prompt)
    assert read_llm_request_result(None, "cache") is None
    assert read_llm_request_result(result, "cache") is result
    assert read_llm_request_result(
        {"prompt": prompt}, "cache"
    ) == ProcessLLMRequestResult(prompt=prompt)
    assert read_llm_request_result(
        {"response": response}, "cache"
    ) == ProcessLLMRequestResult(response=response)
    assert read_llm_request_result({}, "cache") == ProcessLLMRequestResult()


@pytest.mark.parametrize(
    "bad",
    [
        [PromptUserMessage(content=[PromptTextPart("hi")])],
        {"prompt": [], "model": "x"},
        "hi",
    ],
)
def test_read_llm_request_result_rejects_invalid_values(bad: object) -> None:
    """A bare prompt list, unknown keys or other types are errors."""
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'cache': process_llm_request returned .*; expected None or "
        r"ProcessLLMRequestResult\(prompt=..., response=...\)",
    ):
        read_llm_request_result(bad, "cache")


# --- read_message_result ------------------------------------------------------------

MESSAGE_HOOKS = (
    "process_input",
    "process_output_step",
    "process_tool_result",
    "process_output_result",
)


@pytest.mark.parametrize("hook", MESSAGE_HOOKS)
def test_read_message_result_none_and_same_list_mean_no_change(hook: str) -> None:
    """None and the message_list itself give None (no change) for every hook."""
    ml = MessageList()
    assert read_message_result(None, "p", hook, ml) is None
    assert read_message_result(ml, "p", hook, ml) is None


@pytest.mark.parametrize(
    "hook", ["process_output_step", "process_tool_result", "process_output_result"]
)
def test_read_message_result_empty_list_is_no_change_after_input(hook: str) -> None:
    """``[]`` means "fine, no change" for the output-side hooks (the seed's
    QualityGuardrail returns ``[]``)."""
    assert read_message_result([], "p", hook, MessageList()) is None


def test_read_message_result_empty_list_from_process_input_replaces() -> None:
    """From ``process_input``, ``[]`` is a (now empty) list of input messages."""
    result = read_message_result([], "p", "process_input", MessageList())
    assert result == ProcessInputResult(messages=[])


@pytest.mark.parametrize("hook", MESSAGE_HOOKS)
def test_read_message_result_wraps_a_non_empty_list(hook: str) -> None:
    """A non-empty list or tuple becomes ProcessInputResult(messages=...)."""
    messages = [Message.user("a", id="u1"), Message.user("b", id="u2")]
    ml = MessageList()
    for value in (messages, tuple(messages)):
        result = read_message_result(value, "p", hook, ml)
        assert result == ProcessInputResult(messages=messages)
        assert result is not None
        assert all(a is b for a, b in zip(result.messages, messages, strict=True))


def test_read_message_result_passes_a_result_object() -> None:
    """A ProcessInputResult comes back unchanged."""
    result = ProcessInputResult(messages=[], system_messages=["be brief"])
    assert read_message_result(result, "p", "process_input", MessageList()) is result


@pytest.mark.parametrize("key", ["system_messages", "systemMessages"])
def test_read_message_result_reads_messages_and_system_messages_dicts(
    key: str,
) -> None:
    """``{"messages", "system_messages"}`` (or camelCase) becomes a result."""
    messages = [Message.user("hi", id="u1")]
    system = [SystemMessage(content="be brief")]
    assert read_message_result(
        {"messages": messages, key: system}, "p", "process_input", MessageList()
    ) == ProcessInputResult(messages=messages, system_messages=system)


def test_read_message_result_rejects_a_different_message_list() -> None:
    """Returning another MessageList instance is an error (seed)."""
    with pytest.raises(
        ProcessorContractError,
        match="processor 'p': process_output_step returned a different MessageList; "
        "modify the message_list passed in and return it",
    ):
        read_message_result(MessageList(), "p", "process_output_step", MessageList())


def test_read_message_result_rejects_dict_without_messages() -> None:
    """A dict needs ``messages``."""
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'p': process_input returned \{'system_messages': \[\]\} "
        r"without 'messages'",
    ):
        read_message_result(
            {"system_messages": []}, "p", "process_input", MessageList()
        )


def test_read_message_result_rejects_messages_with_message_list() -> None:
    """``messages`` together with ``messageList`` is an error naming the key."""
    ml = MessageList()
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'p': process_input returned a dict with the unknown key "
        r"'messageList'; expected only \['messages', 'system_messages'\]",
    ):
        read_message_result(
            {"messages": [], "messageList": ml}, "p", "process_input", ml
        )


@pytest.mark.parametrize("bad", ["hello", 42, Message.user("hi"), True])
def test_read_message_result_rejects_other_types(bad: object) -> None:
    """Anything else names the processor, the hook and the accepted shapes."""
    with pytest.raises(
        ProcessorContractError,
        match=r"processor 'p': process_tool_result returned .*; expected None, a "
        r"list of messages, \{'messages': ..., 'system_messages': ...\}, or the "
        r"message_list",
    ):
        read_message_result(bad, "p", "process_tool_result", MessageList())


# --- calling hooks ----------------------------------------------------------------


async def test_call_hook_calls_a_sync_hook_without_checkpointing() -> None:
    """A sync hook is called directly; no checkpoint is taken."""
    args = make_args()
    seen: list[HookArgs] = []

    def hook(a: HookArgs) -> str:
        seen.append(a)
        return "done"

    with trio.testing.assert_no_checkpoints():
        assert await call_hook(hook, False, args) == "done"
    assert seen == [args]
    assert seen[0] is args


async def test_call_hook_awaits_an_async_hook() -> None:
    """An async hook's coroutine is awaited and its result returned."""

    async def hook(a: HookArgs) -> str:
        await trio.lowlevel.checkpoint()
        return f"async {a.processor_id}"

    assert await call_hook(hook, True, make_args()) == "async guard"


async def test_call_hook_awaits_what_a_sync_hook_returns() -> None:
    """A sync hook that returns an awaitable has it awaited."""

    async def later(a: HookArgs) -> int:
        await trio.lowlevel.checkpoint()
        return a.retry_count + 1

    def hook(a: HookArgs) -> Awaitable[int]:
        return later(a)

    assert await call_hook(hook, False, make_args(retry_count=4)) == 5


async def test_call_hook_lets_tripwire_through() -> None:
    """A hook's abort propagates out of call_hook unchanged."""

    async def hook(a: HookArgs) -> None:
        a.abort("nope", metadata={"k": 1})

    with pytest.raises(TripWire, match="nope") as info:
        await call_hook(hook, True, make_args())
    assert (info.value.processor_id, info.value.metadata) == ("guard", {"k": 1})


class AsyncCallable:
    async def __call__(self, args: HookArgs) -> str:
        return "called"


class SyncCallable:
    def __call__(self, args: HookArgs) -> str:
        return "called"


class WithMethods:
    async def async_method(self, args: HookArgs) -> None:
        return None

    def sync_method(self, args: HookArgs) -> None:
        return None


async def async_function(args: HookArgs, extra: int = 0) -> None:
    return None


def sync_function(args: HookArgs) -> None:
    return None


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (async_function, True),
        (sync_function, False),
        (AsyncCallable(), True),
        (SyncCallable(), False),
        (WithMethods().async_method, True),
        (WithMethods().sync_method, False),
        (functools.partial(async_function, extra=1), True),
        (lambda args: async_function(args), False),
    ],
    ids=[
        "async-def",
        "def",
        "async-callable-object",
        "sync-callable-object",
        "async-method",
        "sync-method",
        "partial-of-async",
        "lambda-returning-coroutine",
    ],
)
def test_is_async_hook(fn: Any, expected: bool) -> None:
    """Coroutine functions, async methods, partials and objects with an async
    ``__call__`` are async hooks; a sync wrapper is not."""
    assert is_async_hook(fn) is expected


async def test_call_hook_with_an_async_callable_object() -> None:
    """An object with ``async def __call__`` is awaited as an async hook."""
    hook = AsyncCallable()
    assert await call_hook(hook, is_async_hook(hook), make_args()) == "called"


def test_the_typed_hook_stubs_exist_for_type_checkers_only() -> None:
    """``Processor`` declares every hook for editors (under TYPE_CHECKING); at
    run time a subclass has only the hooks it defines, so registration puts it
    only in the lanes it asked for."""
    from procession.processors import register_processors
    from procession.processors._contract import HOOK_NAMES

    for hook in HOOK_NAMES:
        assert not hasattr(Processor, hook), hook

    class OnlyInput(Processor):
        id = "only-input"

        def process_input(self, args: Any) -> None:
            return None

    (spec,) = register_processors(input=[OnlyInput()]).input
    assert set(spec.hooks) == {"process_input"}
