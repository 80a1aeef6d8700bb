"""What the OpenAI Chat Completions and Responses dialects share, spoken
directly over ``httpx2``.

No ``openai`` SDK: both endpoints are a POST with ``stream: true`` whose body is
server-sent events, which ``_sse`` reads. Works against any OpenAI-compatible
server through ``base_url`` (which includes ``/v1``). Here: the model's
transport (the API key, the URL, the send, the error for a response that is
not a stream), the error event in a 200 stream, usage, and the request pieces
both bodies spell alike. Each dialect's tables and its mapping to chunks are in
its own module (``_openai_chat``, ``_openai_responses``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from .._errors import (
    ConfigurationError,
    ProviderError,
    ProviderStreamError,
)
from .._secrets import register_secret
from ..data import (
    PromptFilePart,
    Usage,
)
from ..models import ModelRequest, ToolChoice
from ._errors import (
    headers_of,
    http_error,
    openai_error_code,
    openai_payload_retryable,
    parse_error_body,
    retryable_status,
    stream_error,
    transport_error,
)
from ._http_model import HttpModel
from ._json import as_dict, dumps, get_dict, get_int, get_str
from ._sse import (
    CLOSE_DEADLINE,
    DEFAULT_MAX_EVENT_BYTES,
    usage_total,
)

if TYPE_CHECKING:
    import httpx2

__all__: list[str] = []  # shared by _openai_chat and _openai_responses

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _import_httpx2() -> Any:
    try:
        import httpx2
    except ImportError as exc:
        raise ConfigurationError(
            "the OpenAI providers need the 'httpx2' package, which is not "
            'installed: pip install "procession[openai]"'
        ) from exc
    return httpx2


class _OpenAIModel(HttpModel):
    """What the Chat Completions and Responses models share: configuration,
    the HTTP client, sending the request and mapping HTTP errors."""

    _path: ClassVar[str]

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx2.AsyncClient | None = None,
        default_headers: Mapping[str, str] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        super().__init__(model_id, max_event_bytes=max_event_bytes)
        name = type(self).__name__
        http = _import_httpx2()
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        if not key:
            raise ConfigurationError(
                f"no OpenAI API key for model {model_id!r}: set the {API_KEY_ENV} "
                f"environment variable or pass {name}(api_key=...) (any non-empty "
                f"string, for a compatible server that does not check keys)"
            )
        register_secret(key)  # no error, log line or frame shows it
        url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        self._url = url.rstrip("/") + self._path
        self._headers = {
            "authorization": f"Bearer {key}",
            "accept": "text/event-stream",
            **dict(default_headers or {}),
        }
        self._owns_client = client is None
        if client is None:
            client = http.AsyncClient(timeout=http.Timeout(600.0, connect=10.0))
        self._http: httpx2.AsyncClient = client

    @property
    def url(self) -> str:
        """The endpoint requests are posted to."""
        return self._url

    async def _send(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[httpx2.Response, dict[str, Any]]:
        import httpx2

        http_request = self._http.build_request(
            "POST", self._url, json=body, headers={**self._headers, **headers}
        )
        try:
            response = await self._http.send(http_request, stream=True)
        except httpx2.TransportError as exc:
            raise transport_error(self._provider, exc) from exc
        content_type = response.headers.get("content-type", "")
        if response.status_code >= 400 or content_type.startswith("application/json"):
            raise await self._rejected(response)
        return response, body

    async def _close_client(self) -> None:
        await self._http.aclose()

    async def _rejected(self, response: httpx2.Response) -> ProviderError:
        """The error for a response that is not a stream (read, then closed)."""
        import httpx2

        try:
            raw = await response.aread()
        except httpx2.TransportError:
            raw = b""
        finally:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + CLOSE_DEADLINE
                await response.aclose()
        body = parse_error_body(raw)
        headers = headers_of(response)
        code = openai_error_code(body)
        if response.status_code < 400:
            return stream_error(
                f"{self._provider} answered with JSON instead of an event stream: "
                f"{str(body)[:500]}",
                headers=headers,
                body=body,
                is_retryable=openai_payload_retryable(body),
                code=code,
            )
        retryable = retryable_status(response.status_code, headers)
        if code == "insufficient_quota":
            retryable = False
        return http_error(
            self._provider,
            response.status_code,
            headers,
            body,
            code=code,
            is_retryable=retryable,
        )


def _unsupported(settings: Mapping[str, Any], known: frozenset[str]) -> list[Any]:
    return [
        {"type": "unsupported-setting", "setting": name}
        for name in settings
        if name not in known and settings[name] is not None
    ]


def _result_text(result: object) -> str:
    return result if isinstance(result, str) else dumps(result)


def _args_text(args: object) -> str:
    return args if isinstance(args, str) else dumps(args if args is not None else {})


def _data_url(part: PromptFilePart) -> str:
    if part.data.startswith(("http://", "https://", "data:")):
        return part.data
    return f"data:{part.mime_type};base64,{part.data}"


def _options(request: ModelRequest) -> dict[str, Any]:
    return as_dict(request.provider_options.get("openai"))


def _tool_name_of(choice: ToolChoice) -> str | None:
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        name = choice.get("tool_name") or choice.get("toolName")
        if isinstance(name, str):
            return name
    return None


def _bad_choice(choice: object) -> ConfigurationError:
    return ConfigurationError(
        f"tool_choice must be 'auto', 'none', 'required' or "
        f"{{'type': 'tool', 'tool_name': ...}}, got {choice!r}"
    )


def _openai_usage(
    usage: dict[str, Any],
    *,
    input_key: str,
    output_key: str,
    input_details: str,
    output_details: str,
) -> Usage:
    return usage_total(
        Usage(
            input_tokens=get_int(usage, input_key),
            output_tokens=get_int(usage, output_key),
            total_tokens=get_int(usage, "total_tokens"),
            reasoning_tokens=get_int(
                get_dict(usage, output_details), "reasoning_tokens"
            ),
            cached_input_tokens=get_int(
                get_dict(usage, input_details), "cached_tokens"
            ),
            raw=dict(usage),
        )
    )


def _event_error(
    provider: str, payload: dict[str, Any], response: httpx2.Response
) -> ProviderStreamError:
    """An error event (or ``response.failed``) in a 200 stream: ``body`` is the
    whole event."""
    inner = get_dict(payload, "error") or get_dict(
        get_dict(payload, "response"), "error"
    )
    message = get_str(inner, "message") or get_str(payload, "message") or str(payload)
    code = openai_error_code(payload)
    return stream_error(
        f"{provider} stream error ({code}): {message}",
        headers=headers_of(response),
        body=payload,
        is_retryable=openai_payload_retryable(payload),
        code=code,
    )
