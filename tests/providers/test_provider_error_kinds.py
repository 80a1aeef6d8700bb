"""The ``ProviderError`` kinds: the subtree, which failure maps to which kind at
the provider edge, the fields each keeps, and the tree drawn in ``_errors``."""

from __future__ import annotations

import re
from typing import Any

import anthropic
import httpx2
import pytest

import procession
import procession.mcp  # its errors name it as their home once it is imported
import procession.memory
import procession.processors
import procession.processors.builtin
import procession.testing
import procession.testing.fake_provider
from procession import (
    OverloadedError,
    ProcessionError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    ProviderTimeoutError,
    RateLimitError,
    TripWire,
    _errors,
)
from procession.processors import is_retryable_openai_responses_stream_error
from procession.providers import _errors as edge

KINDS: list[tuple[type[ProviderError], type[ProviderError]]] = [
    (ProviderStatusError, ProviderError),
    (RateLimitError, ProviderStatusError),
    (OverloadedError, ProviderStatusError),
    (ProviderTimeoutError, ProviderError),
    (ProviderConnectionError, ProviderError),
    (ProviderStreamError, ProviderError),
]
URL = "https://api.example.test/v1/messages"

# --- the subtree ------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "parent"), KINDS)
def test_each_kind_is_a_provider_error_under_its_parent(
    cls: type[ProviderError], parent: type[ProviderError]
) -> None:
    assert cls.__bases__ == (parent,)
    assert issubclass(cls, ProviderError)
    # Not OSErrors: socket code that catches OSError must not swallow them.
    assert not issubclass(cls, OSError)


@pytest.mark.parametrize("cls", [cls for cls, _ in KINDS])
def test_each_kind_is_public_from_procession_and_procession_processors(
    cls: type[ProviderError],
) -> None:
    """Its one home is ``procession``; ``procession.processors`` still has it,
    as a deprecated alias (issue 27 §3)."""
    assert getattr(procession, cls.__name__) is cls
    with pytest.warns(DeprecationWarning, match="import it from procession "):
        assert getattr(procession.processors, cls.__name__) is cls
    assert cls.__module__ == "procession"


def _rate_limited_from(original: BaseException) -> None:
    raise RateLimitError(
        "slow down",
        status_code=429,
        headers={"Retry-After": "7"},
        body={"error": {"type": "rate_limit_error"}},
        is_retryable=True,
        code="rate_limit_error",
    ) from original


def test_a_kind_keeps_every_field_and_the_cause() -> None:
    original = OSError("reset")
    with pytest.raises(RateLimitError, match="slow down") as info:
        _rate_limited_from(original)
    error = info.value
    assert error.message == "slow down"
    assert error.status_code == 429
    assert error.headers["retry-after"] == "7"
    assert error.body == {"error": {"type": "rate_limit_error"}}
    assert error.is_retryable is True
    assert error.code == "rate_limit_error"
    assert error.__cause__ is original
    assert repr(error) == (
        "RateLimitError('slow down', status_code=429, is_retryable=True, "
        "code='rate_limit_error')"
    )


def test_except_provider_error_still_catches_every_kind() -> None:
    for cls in (ProviderTimeoutError, ProviderConnectionError, ProviderStreamError):
        with pytest.raises(ProviderError, match="boom"):
            raise cls("boom", code="x")


# --- the tree drawing ---------------------------------------------------------------


def _public_errors() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {"TripWire": TripWire}
    stack: list[type[BaseException]] = [ProcessionError]
    while stack:
        cls = stack.pop()
        if not cls.__name__.startswith("_"):
            found[cls.__name__] = cls
        stack.extend(cls.__subclasses__())
    return found


def test_the_tree_draws_every_public_error_and_nothing_else() -> None:
    doc = _errors.__doc__
    assert doc is not None
    drawn = set(
        re.findall(
            r"^ {4}(?:[│ ]   )*(?:[├└]── )?"
            r"(\w+(?:Error|Exhausted|Timeout|Exceeded|Decided|NotFound)|TripWire)\b",
            doc,
            re.M,
        )
    )
    assert drawn == set(_public_errors())


@pytest.mark.parametrize(
    "name",
    sorted(n for n, c in _public_errors().items() if c.__module__ != "procession"),
)
def test_an_error_homed_elsewhere_is_drawn_with_its_module(name: str) -> None:
    cls = _public_errors()[name]
    doc = _errors.__doc__
    assert doc is not None
    lines = doc.splitlines()
    (at,) = [i for i, line in enumerate(lines) if re.search(rf"── {name}\b", line)]
    assert f"({cls.__module__})" in lines[at + 1]


def test_errors_homed_elsewhere_include_the_test_kit_errors() -> None:
    # The walk above only sees what is imported; the test kit's are.
    homes = {n: c.__module__ for n, c in _public_errors().items()}
    assert homes["ScriptError"] == "procession.testing"
    assert homes["ScriptExhausted"] == "procession.testing"
    assert homes["FakeProviderError"] == "procession.testing.fake_provider"
    assert homes["StorageError"] == "procession.memory"


# --- HTTP error statuses ------------------------------------------------------------

OPENAI_OVERLOADED = {
    "error": {
        "message": "That model is currently overloaded with other requests. You "
        "can retry your request, or contact us through our help center.",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}


def _anthropic_body(error_type: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": "m"}}


@pytest.mark.parametrize(
    ("status", "body", "code", "kind"),
    [
        (429, _anthropic_body("rate_limit_error"), "rate_limit_error", RateLimitError),
        (
            429,
            {"error": {"code": "insufficient_quota"}},
            "insufficient_quota",
            RateLimitError,
        ),
        (529, _anthropic_body("overloaded_error"), "overloaded_error", OverloadedError),
        (503, OPENAI_OVERLOADED, "server_error", OverloadedError),
        (503, _anthropic_body("overloaded_error"), "overloaded_error", OverloadedError),
        (503, "upstream overloaded", None, OverloadedError),
        (503, {"error": {"message": "Service Unavailable"}}, None, ProviderStatusError),
        (500, _anthropic_body("api_error"), "api_error", ProviderStatusError),
        (
            401,
            _anthropic_body("authentication_error"),
            "authentication_error",
            ProviderStatusError,
        ),
        (
            400,
            _anthropic_body("overloaded_error"),
            "overloaded_error",
            ProviderStatusError,
        ),
    ],
)
def test_an_http_error_status_maps_to_its_kind(
    status: int, body: object, code: str | None, kind: type[ProviderStatusError]
) -> None:
    error = edge.http_error("p", status, {"Retry-After": "3"}, body, code=code)
    assert type(error) is kind
    assert error.status_code == status
    assert error.headers["retry-after"] == "3"
    assert error.body is body
    assert error.code == code
    assert error.is_retryable is edge.retryable_status(status, {})
    assert str(error).startswith(f"p API error {status}")


def test_an_http_error_keeps_an_explicit_is_retryable() -> None:
    error = edge.http_error(
        "openai", 429, {}, {}, code="insufficient_quota", is_retryable=False
    )
    assert isinstance(error, RateLimitError)
    assert error.is_retryable is False


# --- transport failures ---------------------------------------------------------------

REQUEST = httpx2.Request("POST", URL)


@pytest.mark.parametrize(
    ("exc", "kind", "code"),
    [
        (
            httpx2.ReadTimeout("read timed out", request=REQUEST),
            ProviderTimeoutError,
            "timeout",
        ),
        (
            httpx2.ConnectTimeout("connect timed out", request=REQUEST),
            ProviderTimeoutError,
            "timeout",
        ),
        (
            httpx2.ConnectError("[Errno 111] Connection refused", request=REQUEST),
            ProviderConnectionError,
            "ECONNREFUSED",
        ),
        (
            httpx2.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)",
                request=REQUEST,
            ),
            ProviderConnectionError,
            "incomplete_chunked_read",
        ),
        (
            httpx2.ReadError("[Errno 104] Connection reset by peer", request=REQUEST),
            ProviderConnectionError,
            "ECONNRESET",
        ),
    ],
)
def test_a_transport_failure_maps_to_timeout_or_connection(
    exc: Exception, kind: type[ProviderError], code: str
) -> None:
    error = edge.transport_error("openai", exc)
    assert type(error) is kind
    assert error.code == code
    assert error.is_retryable is True
    assert error.status_code is None
    assert str(exc) in str(error)


def test_an_incomplete_stream_is_a_stream_error() -> None:
    error = edge.incomplete_stream("openai", "response.completed")
    assert type(error) is ProviderStreamError
    assert error.code == "incomplete_stream"
    assert error.is_retryable is True
    assert error.status_code is None
    assert str(error) == "openai stream ended without response.completed"


# --- the anthropic SDK's exceptions -------------------------------------------------


def _status_error(status: int, body: object) -> anthropic.APIStatusError:
    response = httpx2.Response(
        status, request=REQUEST, headers={"content-type": "text/event-stream"}
    )
    return anthropic.APIStatusError("m", response=response, body=body)


def test_an_anthropic_error_event_in_a_200_stream_is_a_stream_error() -> None:
    error = edge.anthropic_error(
        _status_error(200, _anthropic_body("overloaded_error"))
    )
    assert type(error) is ProviderStreamError
    assert error.code == "overloaded_error"
    assert error.is_retryable is True
    assert error.status_code is None
    assert error.headers["content-type"] == "text/event-stream"


@pytest.mark.parametrize(
    ("status", "error_type", "kind"),
    [
        (429, "rate_limit_error", RateLimitError),
        (529, "overloaded_error", OverloadedError),
        (500, "api_error", ProviderStatusError),
    ],
)
def test_an_anthropic_status_error_maps_to_its_kind(
    status: int, error_type: str, kind: type[ProviderStatusError]
) -> None:
    error = edge.anthropic_error(_status_error(status, _anthropic_body(error_type)))
    assert type(error) is kind
    assert error.status_code == status
    assert error.code == error_type


def test_an_anthropic_timeout_is_a_timeout_error() -> None:
    error = edge.anthropic_error(anthropic.APITimeoutError(request=REQUEST))
    assert type(error) is ProviderTimeoutError
    assert error.code == "timeout"


def test_an_anthropic_connection_error_is_a_connection_error() -> None:
    refused = anthropic.APIConnectionError(request=REQUEST)
    refused.__cause__ = httpx2.ConnectError("refused", request=REQUEST)
    bare = anthropic.APIConnectionError(request=REQUEST)
    for exc, code in ((refused, "ECONNREFUSED"), (bare, "ECONNRESET")):
        error = edge.anthropic_error(exc)
        assert type(error) is ProviderConnectionError
        assert error.code == code
        assert error.is_retryable is True


# --- one home for the OpenAI transient codes ----------------------------------------


def test_the_openai_transient_codes_have_one_home() -> None:
    home = _errors.RETRYABLE_OPENAI_ERROR_CODES
    assert procession.processors.builtin.RETRYABLE_OPENAI_ERROR_CODES is home
    # The edge imports it (not re-exported, hence vars()).
    assert vars(edge)["RETRYABLE_OPENAI_ERROR_CODES"] is home
    assert "overloaded" in home


def test_the_built_in_matcher_reads_a_stream_error_body_not_a_status_error_body() -> (
    None
):
    event = {"type": "error", "error": {"type": "server_error", "code": None}}
    stream = ProviderStreamError("s", body=event, code="server_error")
    status = ProviderStatusError("h", status_code=500, body=event, code="server_error")
    assert is_retryable_openai_responses_stream_error(stream) is True
    assert is_retryable_openai_responses_stream_error(status) is False
