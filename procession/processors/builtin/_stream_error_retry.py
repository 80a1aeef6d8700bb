"""``StreamErrorRetryProcessor``: retry transient LLM API and stream failures.

An *error processor* (only ``process_api_error``), off by default: add it to an
agent's ``error_processors`` for bounded retries::

    agent = Agent(
        id="resilient-agent",
        model=model,
        error_processors=[
            StreamErrorRetryProcessor(
                max_retries=2,
                delay_ms=lambda args: min(1000 * 2**args.retry_count, 30_000),
                matchers=[is_econnreset],
            )
        ],
    )

How it decides (the seed, and Mastra's ``stream-error-retry-processor.ts``):

0. A ``RunDeadlineExceeded`` anywhere in the cause chain is never retried: the
   run's time is spent, and no retry can give it back (procession's addition;
   Mastra has no run deadline).
1. The matchers are ``[is_retryable_openai_responses_stream_error, *matchers]``.
   Starting at the error and following its cause chain (``__cause__``, or a
   ``cause`` attribute / key; cycle-safe), at each node the first matcher that
   returns true supplies the policy (a ``RetryMatcher``'s ``max_retries``,
   ``delay_ms`` and ``on_retry``; a bare predicate supplies none); failing that,
   provider retry metadata on the node (``ProviderError.is_retryable is True``,
   or a mapping / object whose ``isRetryable`` / ``is_retryable`` is ``True``)
   supplies the processor's defaults. A status code alone is not metadata.
2. Nothing matched: with ``retry_unknown_errors`` the processor's defaults
   apply, unless the error is a terminal authorization error
   (``is_terminal_auth_error``: 401, 403, or an auth error code anywhere in the
   error graph); otherwise no retry.
3. Budget first: ``retry_count >= max_retries`` (the policy's, else the
   processor's) means no retry, before any delay is computed, any timer or
   any ``on_retry``.
4. The wait is ``max(configured delay, min(Retry-After, max_retry_after_ms))``;
   a configured ``delay_ms`` (a number, or a sync or async function of the
   hook's argument object) is not capped. ``on_retry(args, delay_ms)`` runs
   first, then the processor sleeps on trio's clock (ending early, without
   raising, when the run's abort signal is set) and returns ``retry=True``.

Units stay the seed's: milliseconds (SPEC §2.16). The agent's
``max_processor_retries`` also bounds retries (10 when error processors are
configured and it is unset); for one retry budget, set both to the same value.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import inspect
import json
import math
import numbers
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeAlias, cast

import attrs
import trio

from ..._errors import (
    RETRYABLE_OPENAI_ERROR_CODES,
    ConfigurationError,
    RunDeadlineExceeded,
)
from .._context import AbortSignal
from .._contract import ProcessAPIErrorArgs, ProcessAPIErrorResult, Processor

__all__ = [
    "DEFAULT_MAX_RETRY_AFTER_MS",
    "RETRYABLE_OPENAI_ERROR_CODES",
    "TERMINAL_AUTH_ERROR_CODES",
    "DelayMs",
    "ErrorMatcher",
    "OnRetry",
    "RetryMatcher",
    "StreamErrorRetryProcessor",
    "get_retry_after_ms",
    "is_bad_request_error",
    "is_retryable_openai_responses_stream_error",
    "is_terminal_auth_error",
]

DEFAULT_MAX_RETRY_AFTER_MS: Final = 30_000
"""The default cap on a provider's Retry-After hint, in milliseconds."""

TERMINAL_AUTH_ERROR_CODES: Final = frozenset(
    {
        "access_denied",
        "authentication_error",
        "forbidden",
        "invalid_api_key",
        "permission_denied",
    }
)
"""Error codes / types that are never retried by ``retry_unknown_errors``."""

_TERMINAL_AUTH_STATUSES: Final = frozenset({401, 403})
_RETRY_PHRASE: Final = re.compile(r"you can retry your request", re.IGNORECASE)
_DIGITS: Final = re.compile(r"[0-9]+")
# Signed, fractional or exponent numbers are malformed delay-seconds, never dates.
_NUMERIC_LOOKING: Final = re.compile(r"[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?")
_HEADER_KEYS: Final = ("headers", "response_headers", "responseHeaders")
_STATUS_KEYS: Final = ("status_code", "statusCode", "status")
_MAX_DEPTH: Final = 32  # bounds every walk through an error graph

ErrorMatcher: TypeAlias = Callable[[Any], bool]
"""A predicate on one node of the error's cause chain."""

DelayMs: TypeAlias = "float | Callable[[ProcessAPIErrorArgs], float | Awaitable[float]]"
"""A delay in milliseconds, or a (sync or async) function of the hook's argument
object returning one."""

OnRetry: TypeAlias = Callable[[ProcessAPIErrorArgs, float], object]
"""Called as ``on_retry(args, delay_ms)`` before waiting; may be async."""


# --- reading arbitrary error objects ---------------------------------------------


def _get(node: object, key: str) -> Any:
    """``node[key]`` for a mapping, else ``node.key``; ``None`` when absent (or
    when reading it raises: error objects are foreign, a matcher must not fail)."""
    try:
        if isinstance(node, Mapping):
            return node.get(key)
        return getattr(node, key, None)
    except Exception:
        return None


def _cause(node: object) -> Any:
    """The next node of the cause chain: ``__cause__`` of an exception, else a
    ``cause`` attribute or key."""
    if isinstance(node, BaseException) and node.__cause__ is not None:
        return node.__cause__
    return _get(node, "cause")


def _cause_chain(error: object) -> Iterator[Any]:
    """``error`` and its causes, each once (cycle-safe, bounded)."""
    seen: set[int] = set()
    node = error
    while node is not None and id(node) not in seen and len(seen) < _MAX_DEPTH:
        seen.add(id(node))
        yield node
        node = _cause(node)


def _json_object(value: object) -> Any:
    """A JSON string body parsed; other values unchanged; unparsable → ``None``."""
    if isinstance(value, str | bytes | bytearray):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def _is_object(value: object) -> bool:
    """Whether ``value`` is a structured value (not a scalar)."""
    return value is not None and not isinstance(
        value, str | bytes | bytearray | numbers.Number
    )


# --- the built-in OpenAI Responses matcher ---------------------------------------


def _openai_payload(candidate: object) -> Any:
    """The ``error`` object of an OpenAI Responses stream error event, or ``None``.

    ``{"type": "error", "error": {...}}`` → ``error``;
    ``{"type": "response.failed", "response": {"error": {...}}}`` →
    ``response.error``. An event forwarded wrapped in another
    ``{"type": "error", "error": <event>}`` is unwrapped (the AI SDK does that).
    """
    payload: Any = None
    node = candidate
    for _ in range(3):
        kind = _get(node, "type")
        if kind == "error":
            inner = _get(node, "error")
        elif kind == "response.failed":
            inner = _get(_get(node, "response"), "error")
        else:
            break
        if not _is_object(inner):
            break
        payload = inner
        node = inner
    return payload


def _retryable_payload(payload: object) -> bool:
    code = _get(payload, "code")
    if not isinstance(code, str):
        code = _get(payload, "type")
    if isinstance(code, str):
        lowered = code.lower()
        if any(marker in lowered for marker in RETRYABLE_OPENAI_ERROR_CODES):
            return True
    message = _get(payload, "message")
    return isinstance(message, str) and _RETRY_PHRASE.search(message) is not None


def is_retryable_openai_responses_stream_error(error: object) -> bool:
    """Whether ``error`` is a transient OpenAI Responses stream error.

    The event is looked for on ``error`` itself (a mapping, or an object with
    ``type`` / ``error`` / ``response`` attributes) and, when no HTTP status came
    with it, in its ``body`` (our ``ProviderError.body``; a dict, or a JSON
    string). Its error object is
    retryable when its ``code`` (or, if ``code`` is not a string, its ``type``),
    lower-cased, contains one of ``RETRYABLE_OPENAI_ERROR_CODES``, or its
    ``message`` says "you can retry your request". Only this node is inspected;
    the processor walks the cause chain.
    """
    candidates: list[object] = [error]
    if _get(error, "status_code") is None:
        # A body is a stream event only when no HTTP status came with it: an
        # HTTP error body that happens to look alike (Anthropic's
        # {"type": "error", "error": {"type": "rate_limit_error"}}) is the
        # provider's own business, judged by its retry metadata.
        candidates.append(_json_object(_get(error, "body")))
    for candidate in candidates:
        payload = _openai_payload(candidate)
        if payload is not None and _retryable_payload(payload):
            return True
    return False


# --- error classification helpers ------------------------------------------------


def _has_retryable_metadata(node: object) -> bool:
    return _get(node, "is_retryable") is True or _get(node, "isRetryable") is True


def _status_codes(node: object) -> Iterator[int]:
    for key in _STATUS_KEYS:
        value = _get(node, key)
        if isinstance(value, int) and not isinstance(value, bool):
            yield value


def _auth_code(node: object) -> bool:
    for key in ("code", "type"):
        value = _get(node, key)
        if (
            isinstance(value, str)
            and value.strip().lower() in TERMINAL_AUTH_ERROR_CODES
        ):
            return True
    return False


def is_terminal_auth_error(error: object) -> bool:
    """Whether ``error`` is an authorization failure no retry can fix.

    Anywhere in the error graph — the error, its ``error``, ``data``, ``body``,
    ``response`` and ``response_body`` / ``responseBody`` (JSON strings are
    parsed), and its causes, cycle-safe — a ``status_code`` / ``statusCode`` /
    ``status`` of 401 or 403, or a ``code`` / ``type`` (trimmed, lower-cased) in
    ``TERMINAL_AUTH_ERROR_CODES``. ``is_retryable=False`` alone is not terminal.
    """
    seen: set[int] = set()
    stack: list[Any] = [error]
    while stack and len(seen) < _MAX_DEPTH * 4:
        node = stack.pop()
        if not _is_object(node) or id(node) in seen:
            continue
        seen.add(id(node))
        if any(code in _TERMINAL_AUTH_STATUSES for code in _status_codes(node)):
            return True
        if _auth_code(node):
            return True
        stack.append(_cause(node))
        for key in ("error", "data", "response"):
            stack.append(_get(node, key))
        for key in ("body", "response_body", "responseBody"):
            stack.append(_json_object(_get(node, key)))
    return False


def is_bad_request_error(error: object) -> bool:
    """Whether ``error`` itself (not its causes) has HTTP status 400
    (``status_code``, ``statusCode`` or ``status``). Retrying 400s is opt-in:
    use it as a matcher."""
    return 400 in _status_codes(error)


# --- Retry-After ------------------------------------------------------------------


def _header(headers: object, name: str) -> str | None:
    """A header value by case-insensitive name, if it is a string."""
    try:
        if isinstance(headers, Mapping):
            items: Any = headers.items()
        else:
            method = getattr(headers, "items", None)
            if not callable(method):
                return None
            items = method()
        for key, value in items:
            if isinstance(key, str) and key.lower() == name:
                return value if isinstance(value, str) else None
    except Exception:
        return None
    return None


def _header_sources(node: object) -> Iterator[Any]:
    for key in _HEADER_KEYS:
        headers = _get(node, key)
        if headers is not None:
            yield headers
    response = _get(node, "response")
    if response is not None:
        headers = _get(response, "headers")
        if headers is not None:
            yield headers


def _aware(moment: _dt.datetime) -> _dt.datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def _parse_retry_after(headers: object, now: _dt.datetime) -> float | None:
    ms = _header(headers, "retry-after-ms")
    if ms is not None and _DIGITS.fullmatch(ms.strip()):
        return float(int(ms.strip()))
    value = _header(headers, "retry-after")
    if value is None:
        return None
    value = value.strip()
    if _DIGITS.fullmatch(value):
        return float(int(value) * 1000)
    if not value or _NUMERIC_LOOKING.fullmatch(value):
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    delta = (_aware(moment) - _aware(now)).total_seconds() * 1000
    return delta if math.isfinite(delta) and delta > 0 else None


def get_retry_after_ms(
    error: object, *, now: _dt.datetime | None = None
) -> float | None:
    """The provider's Retry-After hint on ``error``, in milliseconds, or ``None``.

    Walks ``error`` and its cause chain; at each node reads the headers of
    ``headers`` / ``response_headers`` / ``responseHeaders`` (and
    ``response.headers``), names matched case-insensitively. ``retry-after-ms``
    (digits only) comes first; then ``retry-after`` as delta-seconds (digits
    only: ``-3``, ``1.5``, ``1e3`` are malformed) or an HTTP-date in the future
    of ``now`` (default: the wall clock, UTC; a naive datetime counts as UTC).
    Malformed, empty or past values are ignored and the walk goes on.
    """
    moment = now if now is not None else _dt.datetime.now(_dt.UTC)
    for node in _cause_chain(error):
        for headers in _header_sources(node):
            found = _parse_retry_after(headers, moment)
            if found is not None:
                return found
    return None


def _clamp_delay_ms(value: float) -> float:
    """Finite and positive, else 0 (Mastra's ``clampDelayMs``)."""
    return value if math.isfinite(value) and value > 0 else 0.0


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of milliseconds, got {value!r}")
    return float(value)


# --- options ----------------------------------------------------------------------


def _check_max_retries(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{what} must be an int >= 0 or None, got {value!r}")
    return value


def _check_delay(value: Any, what: str) -> DelayMs | None:
    if value is None or callable(value):
        return cast("DelayMs | None", value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigurationError(
            f"{what} must be a number of milliseconds, a function of the hook "
            f"arguments returning one, or None; got {value!r}"
        )
    return _clamp_delay_ms(float(value))


def _check_on_retry(value: Any, what: str) -> OnRetry | None:
    if value is not None and not callable(value):
        raise ConfigurationError(f"{what} must be callable or None, got {value!r}")
    return cast("OnRetry | None", value)


def _matcher_match(value: Any) -> ErrorMatcher:
    if not callable(value):
        raise ConfigurationError(
            f"RetryMatcher.match must be a predicate (error) -> bool, got {value!r}"
        )
    return cast("ErrorMatcher", value)


def _matcher_max_retries(value: Any) -> int | None:
    return _check_max_retries(value, "RetryMatcher.max_retries")


def _matcher_delay(value: Any) -> DelayMs | None:
    return _check_delay(value, "RetryMatcher.delay_ms")


def _matcher_on_retry(value: Any) -> OnRetry | None:
    return _check_on_retry(value, "RetryMatcher.on_retry")


@attrs.frozen
class RetryMatcher:
    """A matcher with its own retry policy.

    Args:
        match: a predicate on one node of the error's cause chain.
        max_retries: the retry cap for errors it matched (default: the
            processor's ``max_retries``).
        delay_ms: the delay for errors it matched, a number or a (sync or async)
            function of the hook's argument object (default: the processor's).
        on_retry: called as ``on_retry(args, delay_ms)`` (sync or async) before
            the processor waits and retries an error it matched.
    """

    match: ErrorMatcher = attrs.field(converter=_matcher_match)
    max_retries: int | None = attrs.field(default=None, converter=_matcher_max_retries)
    delay_ms: DelayMs | None = attrs.field(default=None, converter=_matcher_delay)
    on_retry: OnRetry | None = attrs.field(default=None, converter=_matcher_on_retry)


_MATCHER_KEYS: Final = {
    "match": "match",
    "max_retries": "max_retries",
    "maxRetries": "max_retries",
    "delay_ms": "delay_ms",
    "delayMs": "delay_ms",
    "on_retry": "on_retry",
    "onRetry": "on_retry",
}


def _matcher(entry: object, index: int) -> RetryMatcher:
    if isinstance(entry, RetryMatcher):
        return entry
    if isinstance(entry, Mapping):
        fields: dict[str, Any] = {}
        for key, value in entry.items():
            name = _MATCHER_KEYS.get(key) if isinstance(key, str) else None
            if name is None:
                raise ConfigurationError(
                    f"matchers[{index}] has the unknown key {key!r}; expected "
                    f"'match', 'max_retries', 'delay_ms', 'on_retry'"
                )
            fields[name] = value
        if "match" not in fields:
            raise ConfigurationError(f"matchers[{index}] is missing the key 'match'")
        return RetryMatcher(**fields)
    if callable(entry):
        return RetryMatcher(entry)
    raise ConfigurationError(
        f"matchers[{index}] must be a predicate (error) -> bool, a RetryMatcher or "
        f"a dict with 'match'; got {entry!r}"
    )


# --- the processor ----------------------------------------------------------------


_BUILTIN: Final = RetryMatcher(is_retryable_openai_responses_stream_error)
_DEFAULTS: Final = RetryMatcher(lambda _error: True)  # a policy of no overrides


async def _wait(delay_ms: float, signal: AbortSignal | None) -> None:
    """Sleep ``delay_ms`` on trio's clock; end early (not raising) on abort."""
    if delay_ms <= 0:
        return
    if signal is None:
        await trio.sleep(delay_ms / 1000)
        return
    if signal.aborted:
        return
    with trio.move_on_after(delay_ms / 1000):
        await signal.wait()


class StreamErrorRetryProcessor(Processor):
    """Retries transient LLM API and stream failures (an error processor).

    Args:
        max_retries: how many retries this processor asks for per call (compared
            with ``retry_count``). Default 1.
        matchers: extra matchers after the built-in OpenAI Responses one; each a
            predicate ``(error) -> bool``, a ``RetryMatcher``, or a dict with its
            keys (``match``, ``max_retries``, ``delay_ms``, ``on_retry``; camelCase
            accepted). Their policies override the processor's for errors they
            matched.
        retry_unknown_errors: also retry errors nothing recognised, except
            terminal authorization errors (401, 403, auth error codes) and a
            ``RunDeadlineExceeded`` (which nothing retries).
        delay_ms: wait before retrying, in ms: a number, or a (sync or async)
            function of the hook's argument object (e.g. exponential backoff on
            ``args.retry_count``). Negative, NaN or infinite values count as 0.
        max_retry_after_ms: cap on the provider's Retry-After hint (not on
            ``delay_ms``). Default 30 000.
        now: the wall clock for HTTP-date Retry-After values (default: UTC now).

    Raises:
        ConfigurationError: an option of the wrong type or range.
    """

    id = "stream-error-retry-processor"
    _name = "Stream Error Retry Processor"

    def __init__(
        self,
        *,
        max_retries: int = 1,
        matchers: Sequence[ErrorMatcher | RetryMatcher | Mapping[str, Any]] = (),
        retry_unknown_errors: bool = False,
        delay_ms: DelayMs | None = None,
        max_retry_after_ms: float = DEFAULT_MAX_RETRY_AFTER_MS,
        now: Callable[[], _dt.datetime] | None = None,
    ) -> None:
        checked = _check_max_retries(max_retries, "max_retries")
        if checked is None:
            raise ConfigurationError("max_retries must be an int >= 0, got None")
        entries: Any = matchers
        if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
            raise ConfigurationError(
                f"matchers must be a sequence of matchers, got {entries!r}"
            )
        unknown: Any = retry_unknown_errors
        if not isinstance(unknown, bool):
            raise ConfigurationError(
                f"retry_unknown_errors must be a bool, got {unknown!r}"
            )
        cap: Any = max_retry_after_ms
        if isinstance(cap, bool) or not isinstance(cap, numbers.Real):
            raise ConfigurationError(
                f"max_retry_after_ms must be a number of milliseconds, got {cap!r}"
            )
        clock: Any = now
        if clock is not None and not callable(clock):
            raise ConfigurationError(f"now must be callable or None, got {clock!r}")
        self.max_retries: int = checked
        self.matchers: tuple[RetryMatcher, ...] = tuple(
            _matcher(entry, index) for index, entry in enumerate(entries)
        )
        self.retry_unknown_errors: bool = unknown
        self.delay_ms: DelayMs | None = _check_delay(delay_ms, "delay_ms")
        self.max_retry_after_ms: float = _clamp_delay_ms(float(cap))
        self._now: Callable[[], _dt.datetime] | None = now

    def __repr__(self) -> str:
        return (
            f"StreamErrorRetryProcessor(max_retries={self.max_retries!r}, "
            f"matchers={len(self.matchers)}, "
            f"retry_unknown_errors={self.retry_unknown_errors!r}, "
            f"delay_ms={self.delay_ms!r}, "
            f"max_retry_after_ms={self.max_retry_after_ms!r})"
        )

    def _policy(self, error: object) -> RetryMatcher | None:
        """The policy for ``error``: the first matcher matching a node of its
        cause chain, or the defaults for retryable metadata; else ``None``."""
        entries = (_BUILTIN, *self.matchers)
        for node in _cause_chain(error):
            for entry in entries:
                if entry.match(node):
                    return entry
            if _has_retryable_metadata(node):
                return _DEFAULTS
        return None

    async def _configured_delay(
        self, delay: DelayMs | None, args: ProcessAPIErrorArgs
    ) -> float:
        if delay is None:
            return 0.0
        if callable(delay):
            value: object = delay(args)
            if inspect.isawaitable(value):
                value = await value
            return _clamp_delay_ms(_number(value, "the delay_ms function's result"))
        return _clamp_delay_ms(float(delay))

    async def process_api_error(
        self, args: ProcessAPIErrorArgs
    ) -> ProcessAPIErrorResult | None:
        """Retry ``args.error`` if it is transient and the budget allows it.
        Waits the retry delay on trio's clock (checkpointing, unless the delay
        is zero); the wait ends early when the run's abort signal fires, and a
        cancellation of the run propagates."""
        error = args.error
        if any(isinstance(node, RunDeadlineExceeded) for node in _cause_chain(error)):
            return None
        policy = self._policy(error)
        if policy is None:
            if not self.retry_unknown_errors or is_terminal_auth_error(error):
                return None
            policy = _DEFAULTS
        max_retries = (
            policy.max_retries if policy.max_retries is not None else self.max_retries
        )
        if args.retry_count >= max_retries:
            return None
        delay = policy.delay_ms if policy.delay_ms is not None else self.delay_ms
        configured = await self._configured_delay(delay, args)
        now = self._now() if self._now is not None else None
        retry_after = get_retry_after_ms(error, now=now)
        provider = (
            min(retry_after, self.max_retry_after_ms)
            if retry_after is not None
            else 0.0
        )
        delay_ms = max(configured, provider)
        if policy.on_retry is not None:
            outcome = policy.on_retry(args, delay_ms)
            if inspect.isawaitable(outcome):
                await outcome
        await _wait(delay_ms, args.abort_signal)
        return ProcessAPIErrorResult(retry=True)
