"""The error tree: bases, messages that name the offender, ``ProviderError`` and
its case-insensitive ``Headers``, and ``TripWire`` outside ``Exception``."""

from __future__ import annotations

import pytest

import procession
from procession import (
    ConfigurationError,
    DuplicateProcessorIdError,
    EventTooLargeError,
    InvalidTextError,
    MessageFormatError,
    MissingFieldError,
    ModelIdleTimeout,
    ProcessionError,
    ProcessorContractError,
    ProcessorError,
    ProviderError,
    ProviderStreamError,
    ProviderTimeoutError,
    RunDeadlineExceeded,
    ToolArgumentsError,
    TripWire,
    UnknownChunkTypeError,
    WireFormatError,
    _errors,
)
from procession.processors import Headers

# --- the tree ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "parents"),
    [
        (ConfigurationError, (ProcessionError, ValueError)),
        (DuplicateProcessorIdError, (ConfigurationError, ValueError)),
        (ProcessorContractError, (ProcessionError, TypeError)),
        (MessageFormatError, (ProcessionError, ValueError)),
        (InvalidTextError, (MessageFormatError, ValueError)),
        (WireFormatError, (ProcessionError, ValueError)),
        (MissingFieldError, (WireFormatError, ValueError)),
        (UnknownChunkTypeError, (WireFormatError, ValueError)),
        (ToolArgumentsError, (ProcessionError, ValueError)),
        (ProcessorError, (ProcessionError,)),
        (ProviderError, (ProcessionError,)),
        (ModelIdleTimeout, (ProviderTimeoutError, ProviderError)),
        (RunDeadlineExceeded, (ProviderTimeoutError, ProviderError)),
        (EventTooLargeError, (ProviderStreamError, ProviderError)),
    ],
)
def test_each_error_derives_from_procession_error_and_its_builtin(
    cls: type[Exception], parents: tuple[type[BaseException], ...]
) -> None:
    """Every error is a ProcessionError and refines the builtin it names."""
    assert issubclass(cls, Exception)
    for parent in parents:
        assert issubclass(cls, parent), parent


@pytest.mark.parametrize("cls", [ProcessorError, ProviderError])
def test_runtime_errors_are_not_value_or_type_errors(cls: type[Exception]) -> None:
    """ProcessorError and ProviderError are not argument errors."""
    assert not issubclass(cls, ValueError | TypeError)


def test_module_docstring_draws_every_error_class() -> None:
    """The tree in the module docstring names every exported class."""
    doc = _errors.__doc__
    assert doc is not None
    for name in _errors.__all__:
        if name != "Headers":
            assert name in doc, name


def test_procession_error_is_reexported_at_the_top() -> None:
    """The root, ProviderError and TripWire are reachable from ``procession``."""
    assert procession.ProcessionError is ProcessionError
    assert procession.ProviderError is ProviderError
    assert procession.TripWire is TripWire


# --- messages name the offender ----------------------------------------------


def test_duplicate_processor_id_error_names_the_id_and_both_processors() -> None:
    """The message shows the id and both processors' reprs and says what to do."""
    error = DuplicateProcessorIdError("guard", "<first>", "<second>")
    assert error.processor_id == "guard"
    assert str(error) == (
        "two different processors share the id 'guard': '<first>' and '<second>'; "
        "give each its own id (the same instance may sit in several lanes)"
    )
    with pytest.raises(ValueError, match="share the id 'guard'"):
        raise error


def test_processor_contract_error_names_processor_and_hook() -> None:
    """The message is ``processor '<id>': <hook> <problem>``."""
    error = ProcessorContractError("guard", "process_input", "returned 42")
    assert str(error) == "processor 'guard': process_input returned 42"
    assert (error.processor_id, error.hook) == ("guard", "process_input")


def test_missing_field_error_names_what_and_field() -> None:
    """The message names the object kind, the missing key and shows the data."""
    error = MissingFieldError("'text-delta' chunk", "payload", {"type": "text-delta"})
    assert (error.what, error.field) == ("'text-delta' chunk", "payload")
    assert str(error) == (
        "'text-delta' chunk is missing the required field 'payload': "
        "{'type': 'text-delta'}"
    )


def test_unknown_chunk_type_error_names_the_type() -> None:
    """The message shows the unknown type and the data, and what is expected."""
    error = UnknownChunkTypeError("progress", {"type": "progress"})
    assert error.type == "progress"
    assert str(error).startswith(
        "unknown chunk type 'progress' in {'type': 'progress'}"
    )
    assert "'data-<name>'" in str(error)


def test_tool_arguments_error_names_tool_and_problem() -> None:
    """The message names the tool and the problem."""
    error = ToolArgumentsError("lookup-customer", "'id' is a required property")
    assert (error.tool_name, error.problem) == (
        "lookup-customer",
        "'id' is a required property",
    )
    assert str(error) == (
        "arguments for tool 'lookup-customer' are invalid: 'id' is a required property"
    )


def test_processor_error_names_processor_hook_and_original() -> None:
    """The message names processor and hook and shows the original's repr."""
    original = KeyError("words")
    error = ProcessorError("word-counter", "process_output_stream", original)
    assert str(error) == (
        "processor 'word-counter' failed in process_output_stream: KeyError('words')"
    )
    assert (error.processor_id, error.hook) == ("word-counter", "process_output_stream")


# --- ProviderError -------------------------------------------------------------


def test_provider_error_defaults() -> None:
    """Only the message is required; the rest default to None / empty headers."""
    error = ProviderError("boom")
    assert str(error) == "boom"
    assert error.message == "boom"
    assert error.status_code is None
    assert error.body is None
    assert error.is_retryable is None
    assert error.code is None
    assert isinstance(error.headers, Headers)
    assert len(error.headers) == 0
    assert repr(error) == "ProviderError('boom')"


def test_provider_error_keeps_every_field() -> None:
    """All keyword fields are kept as given; headers become Headers."""
    body = {"type": "error", "error": {"type": "overloaded_error"}}
    error = ProviderError(
        "overloaded",
        status_code=529,
        headers={"Retry-After": "2"},
        body=body,
        is_retryable=True,
        code="overloaded_error",
    )
    assert error.status_code == 529
    assert error.body is body
    assert error.is_retryable is True
    assert error.code == "overloaded_error"
    assert error.headers["retry-after"] == "2"
    assert repr(error) == (
        "ProviderError('overloaded', status_code=529, is_retryable=True, "
        "code='overloaded_error')"
    )


def test_provider_error_reuses_a_headers_instance() -> None:
    """A Headers object passed in is kept, not copied."""
    headers = Headers({"x-request-id": "req-1"})
    assert ProviderError("x", headers=headers).headers is headers


def test_provider_error_keeps_the_original_as_cause() -> None:
    """``raise ProviderError(...) from original`` keeps the original as __cause__."""
    original = ConnectionResetError("reset by peer")

    def provider_call() -> None:
        try:
            raise original
        except ConnectionResetError as exc:
            raise ProviderError("connection dropped", code="ECONNRESET") from exc

    with pytest.raises(ProviderError, match="connection dropped") as info:
        provider_call()
    assert info.value.__cause__ is original
    assert info.value.code == "ECONNRESET"


def test_provider_error_rejects_non_str_headers() -> None:
    """Header values must be str (a non-str raises TypeError naming it)."""
    with pytest.raises(TypeError, match=r"must be str, got 'Retry-After': 5"):
        ProviderError("x", headers={"Retry-After": 5})  # type: ignore[dict-item]  # the bad value under test


def test_model_idle_timeout_names_the_limit_and_how_to_change_it() -> None:
    """Retryable like the other timeouts; the message says the seconds and
    both places to set them."""
    error = ModelIdleTimeout(60.0, provider="anthropic")
    assert str(error) == (
        "the anthropic model stream produced no event for 60 s (the idle "
        "timeout); to wait longer, set Agent(idle_timeout=...) or pass "
        "idle_timeout=... to generate()/stream()"
    )
    assert (error.idle_timeout, error.is_retryable, error.code) == (
        60.0,
        True,
        "timeout",
    )
    assert error.status_code is None
    assert str(ModelIdleTimeout(2.5)).startswith(
        "the model stream produced no event for 2.5 s"
    )


def test_run_deadline_exceeded_names_the_limit_and_is_not_retryable() -> None:
    """A retry cannot give time back: ``is_retryable`` is False."""
    error = RunDeadlineExceeded(30)
    assert str(error) == (
        "the run's deadline of 30 s passed; to allow more time, set "
        "Agent(run_deadline=...) or pass run_deadline=... to generate()/stream()"
    )
    assert (error.run_deadline, error.is_retryable, error.code) == (
        30,
        False,
        "run_deadline",
    )
    with pytest.raises(ProviderTimeoutError, match="deadline of 30 s"):
        raise error


def test_the_timeouts_are_exported_with_the_other_provider_errors() -> None:
    """Both faces that carry the error tree carry the two timeouts."""
    assert procession.ModelIdleTimeout is ModelIdleTimeout
    assert procession.RunDeadlineExceeded is RunDeadlineExceeded
    assert repr(ModelIdleTimeout(1)) == (
        "ModelIdleTimeout('the model stream produced no event for 1 s (the idle "
        "timeout); to wait longer, set Agent(idle_timeout=...) or pass "
        "idle_timeout=... to generate()/stream()', is_retryable=True, "
        "code='timeout')"
    )


def test_invalid_text_error_names_where_the_field_and_the_code_point() -> None:
    error = InvalidTextError("message 'm1' (user), part #0 (text)", "text", 4, 0xD800)
    assert str(error).startswith(
        "message 'm1' (user), part #0 (text): text holds a lone surrogate U+D800 "
        "at offset 4; expected valid Unicode text"
    )
    assert (error.where, error.field, error.offset, error.code_point) == (
        "message 'm1' (user), part #0 (text)",
        "text",
        4,
        0xD800,
    )


# --- Headers ----------------------------------------------------------------------


def test_headers_are_read_case_insensitively() -> None:
    """Lookup and ``in`` ignore case; iteration keeps the original spelling."""
    headers = Headers({"Retry-After": "5", "X-RateLimit-Reset": "10"})
    assert headers["retry-after"] == "5"
    assert headers["RETRY-AFTER"] == "5"
    assert headers.get("x-ratelimit-reset") == "10"
    assert "retry-AFTER" in headers
    assert "missing" not in headers
    assert list(headers) == ["Retry-After", "X-RateLimit-Reset"]
    assert len(headers) == 2
    assert dict(headers) == {"Retry-After": "5", "X-RateLimit-Reset": "10"}


def test_headers_missing_key_raises_key_error() -> None:
    """A missing header is a KeyError; ``get`` gives the default."""
    headers = Headers({"a": "1"})
    with pytest.raises(KeyError, match="b"):
        headers["B"]
    assert headers.get("b", "fallback") == "fallback"


def test_headers_with_non_str_key_in_test_is_false() -> None:
    """``in`` with a non-str key is False rather than an error."""
    assert Headers({"1": "one"}).__contains__(1) is False


def test_headers_differing_only_in_case_collapse_to_the_last() -> None:
    """Two names that differ only in case are one header; the last one wins."""
    headers = Headers({"Retry-After": "5", "retry-after": "6"})
    assert len(headers) == 1
    assert headers["RETRY-AFTER"] == "6"


@pytest.mark.parametrize(
    ("items", "shown"),
    [({1: "x"}, "1: 'x'"), ({"a": b"1"}, "'a': b'1'"), ({"a": None}, "'a': None")],
)
def test_headers_reject_non_str_names_and_values(
    items: dict[object, object], shown: str
) -> None:
    """Names and values must be str; the error shows the offending pair."""
    with pytest.raises(TypeError, match=f"must be str, got {shown}"):
        Headers(items)  # type: ignore[arg-type]  # the bad value under test


def test_headers_are_read_only_and_compare_as_mappings() -> None:
    """Headers cannot be assigned to and equal a dict with the same items."""
    headers = Headers({"A": "1"})
    with pytest.raises(TypeError, match="does not support item assignment"):
        headers["A"] = "2"  # type: ignore[index]  # read-only is what is tested
    assert headers == {"A": "1"}
    assert repr(headers) == "Headers({'A': '1'})"


# --- TripWire ------------------------------------------------------------------


def test_tripwire_is_a_base_exception_but_not_an_exception() -> None:
    """TripWire derives from BaseException only (as trio.Cancelled does)."""
    assert issubclass(TripWire, BaseException)
    assert not issubclass(TripWire, Exception)
    assert not issubclass(TripWire, ProcessionError)


def test_tripwire_is_not_caught_by_except_exception() -> None:
    """A processor's own ``except Exception`` cannot swallow its abort."""
    swallowed = []

    def careless_hook() -> None:
        try:
            raise TripWire("blocked", processor_id="guard")
        except Exception as exc:  # the kind of handler user code has
            swallowed.append(exc)

    with pytest.raises(TripWire, match="blocked"):
        careless_hook()
    assert swallowed == []


def test_tripwire_fields_and_defaults() -> None:
    """reason is required; retry defaults to False, metadata and processor_id to
    None; ``str`` is the reason."""
    tripwire = TripWire("too long")
    assert tripwire.reason == "too long"
    assert tripwire.retry is False
    assert tripwire.metadata is None
    assert tripwire.processor_id is None
    assert str(tripwire) == "too long"
    assert tripwire.args == ("too long",)


def test_tripwire_keeps_given_fields_and_has_a_full_repr() -> None:
    """The repr shows every field."""
    metadata = {"category": "pii"}
    tripwire = TripWire("pii", retry=True, metadata=metadata, processor_id="guard")
    assert tripwire.metadata is metadata
    assert (tripwire.retry, tripwire.processor_id) == (True, "guard")
    assert repr(tripwire) == (
        "TripWire('pii', retry=True, metadata={'category': 'pii'}, "
        "processor_id='guard')"
    )
