"""The error tree of procession.

Every error procession raises on purpose derives from ``ProcessionError``; each
also derives from the builtin it refines, so ``except ValueError`` keeps working::

    ProcessionError
    ├── ConfigurationError (ValueError)    bad arguments to Agent/generate/stream
    │   ├── DuplicateProcessorIdError      two processors share one id
    │   ├── ToolSourceNotOpenError         a tool source (an MCPTools) used
    │   │                                  outside its ``async with``
    │   └── ScriptError                    a malformed ScriptedModel script
    │                                      (procession.testing)
    ├── ProcessorContractError (TypeError) a hook returned what the contract forbids
    ├── MessageFormatError (ValueError)    a message (or its part) is malformed
    │   └── InvalidTextError               its text holds a lone surrogate
    │                                      (not Unicode; UTF-8 cannot send it)
    ├── WireFormatError (ValueError)       chunk/message JSON is not Mastra's shape
    │   ├── MissingFieldError              a required key is absent
    │   └── UnknownChunkTypeError          the ``type`` is not one we know
    ├── ToolArgumentsError (ValueError)    tool arguments failed the tool's schema
    ├── ProcessorError                     a hook raised (``on_error="raise"``)
    ├── JudgeError                         a judge model gave no usable verdict
    │                                      (procession.processors)
    ├── ProviderError                      a model provider failed (HTTP, stream)
    │   ├── ProviderStatusError            an HTTP error status (``status_code``)
    │   │   ├── RateLimitError             429
    │   │   └── OverloadedError            529, or 503 saying "overloaded"
    │   ├── ProviderTimeoutError           the connect or a read timed out
    │   │   ├── ModelIdleTimeout           no stream event for ``idle_timeout`` s
    │   │   │                              (retryable)
    │   │   └── RunDeadlineExceeded        the run's ``run_deadline`` passed
    │   │                                  (never retried)
    │   ├── ProviderConnectionError        refused, reset, dropped mid-body
    │   └── ProviderStreamError            a 200 stream that failed: an error
    │       │                              event, bad data, no final event
    │       └── EventTooLargeError         one server-sent event passed the
    │                                      model's ``max_event_bytes``
    ├── StorageError                       conversation memory's database failed
    │   │                                  (procession.memory)
    │   ├── StorageUnavailableError        unreachable, or the connection dropped
    │   │   │                              (procession.memory); nothing written
    │   │   └── StorageLockedError         a SQLite file stayed locked
    │   │                                  (procession.memory)
    │   ├── SchemaVersionError             the schema is older or newer; says
    │   │                                  what to run (procession.memory)
    │   ├── ThreadOwnershipError           the thread is another resource's
    │   │                                  (procession.memory)
    │   ├── RunLostError                   a paused run's continuation no longer
    │   │                                  holds it (procession.memory)
    │   └── MissingThreadError (ValueError) memory is on, no thread id came
    │                                      (procession.memory)
    ├── WaitingRunError                    answering a run that waits for a
    │   │                                  person (tool approval, suspension)
    │   ├── WaitingRunNotFound (LookupError) no run waits under that id (for
    │   │                                  this agent and resource)
    │   ├── ApprovalAlreadyDecided         the call was answered already (HTTP
    │   │                                  409); the answer is never applied twice
    │   └── ToolCallNotPendingError (ValueError) the call id names no waiting
    │                                      call (the message lists them)
    ├── SnapshotError (TypeError)          a run cannot pause (or a durable run
    │                                      keep its checkpoint): a value it must
    │                                      keep (a processor's state) is not JSON
    ├── ToolInterruptedError (RuntimeError) a durable run's tool was cut off by
    │                                      its process stopping and is not
    │                                      idempotent: not run again
    ├── NoRunStorageError (ConfigurationError) a run must pause, but its agent
    │                                      has no storage to keep it in
    ├── MCPServerError                     an MCP server failed
    │   │                                  (procession.mcp)
    │   ├── MCPConnectionError             it would not start, or the connection
    │   │                                  dropped (procession.mcp)
    │   ├── MCPTimeoutError                no answer within the connect or call
    │   │                                  timeout (procession.mcp)
    │   └── MCPToolError                   a call answered with an error, which
    │                                      the model sees (procession.mcp)
    ├── ScriptExhausted                    a ScriptedModel ran out of turns
    │                                      (procession.testing)
    └── FakeProviderError (AssertionError) the fake server's script was not met
                                           (procession.testing.fake_provider)

    TripWire (BaseException)               raised by ``args.abort()``; not an error

``TripWire`` derives from ``BaseException`` (as ``trio.Cancelled`` does) so a
processor's own ``except Exception:`` cannot swallow its abort.

The providers raise only the ``ProviderError`` subclasses (a plain
``ProviderError`` comes from a user's script or an ``error`` chunk), so catch by
kind — ``except RateLimitError`` — or read the fields every one of them carries
(``status_code``, ``headers``, ``body``, ``is_retryable``, ``code``,
``__cause__``). ``ProviderTimeoutError`` and ``ProviderConnectionError`` do not
derive from the builtin ``TimeoutError`` / ``ConnectionError``: both are
kinds of ``OSError``, and socket code that catches ``OSError`` must not swallow
a provider failure.

``RETRYABLE_OPENAI_ERROR_CODES`` lives here too, beside the tree: the substrings
of an OpenAI error code that name a transient failure, read both by the
providers (to set ``is_retryable``) and by the built-in
``StreamErrorRetryProcessor`` (whose layer cannot import the providers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._headers import Headers
from ._secrets import redact, redact_deep

__all__ = [
    "ApprovalAlreadyDecided",
    "ConfigurationError",
    "DuplicateProcessorIdError",
    "EventTooLargeError",
    "InvalidTextError",
    "MCPConnectionError",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPToolError",
    "MessageFormatError",
    "MissingFieldError",
    "MissingThreadError",
    "ModelIdleTimeout",
    "NoRunStorageError",
    "OverloadedError",
    "ProcessionError",
    "ProcessorContractError",
    "ProcessorError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "RETRYABLE_OPENAI_ERROR_CODES",
    "RateLimitError",
    "RunDeadlineExceeded",
    "SchemaVersionError",
    "SnapshotError",
    "StorageError",
    "StorageLockedError",
    "StorageUnavailableError",
    "ThreadOwnershipError",
    "ToolArgumentsError",
    "ToolCallNotPendingError",
    "ToolInterruptedError",
    "ToolSourceNotOpenError",
    "TripWire",
    "UnknownChunkTypeError",
    "WaitingRunError",
    "WaitingRunNotFound",
    "WireFormatError",
]

RETRYABLE_OPENAI_ERROR_CODES: Final = (
    "rate_limit",
    "server_error",
    "internal_error",
    "timeout",
    "temporarily_unavailable",
    "service_unavailable",
    "overloaded",
)
"""Substrings of an OpenAI error code (or type), lower-cased, that mark it
transient (the list Mastra's ``StreamErrorRetryProcessor`` uses)."""


class ProcessionError(Exception):
    """Base class of every error procession raises on purpose."""


class ConfigurationError(ProcessionError, ValueError):
    """An argument to ``Agent``, ``generate`` or ``stream`` is not acceptable.

    Raised at once, before any model call.
    """


class DuplicateProcessorIdError(ConfigurationError):
    """Two *different* processor instances share one ``id`` within a call."""

    def __init__(self, processor_id: str, first: object, second: object) -> None:
        super().__init__(
            f"two different processors share the id {processor_id!r}: {first!r} and "
            f"{second!r}; give each its own id (the same instance may sit in "
            f"several lanes)"
        )
        self.processor_id = processor_id


class ToolSourceNotOpenError(ConfigurationError):
    """A tool source (``procession.mcp.MCPTools``) was used while it is not
    open: its tools exist only inside ``async with source:`` (``create_app``
    and ``procession serve`` open the sources of their agents). The message
    names the source."""


class ProcessorContractError(ProcessionError, TypeError):
    """A processor hook returned a value the contract does not allow."""

    def __init__(self, processor_id: str, hook: str, problem: str) -> None:
        super().__init__(f"processor {processor_id!r}: {hook} {problem}")
        self.processor_id = processor_id
        self.hook = hook


class MessageFormatError(ProcessionError, ValueError):
    """A message, or one of its parts, is malformed."""


class InvalidTextError(MessageFormatError):
    """Text in a message is not valid Unicode: it holds a lone surrogate (such
    as ``"\\ud800"``, left by text cut inside a surrogate pair or decoded with
    ``errors="surrogateescape"``), which UTF-8, and so every provider request,
    cannot carry. Raised before any request.

    Attributes: ``where`` (the message and part, e.g. ``"message 'm1' (user),
    part #0 (text)"``), ``field`` (the string's path inside it, e.g. ``"text"``
    or ``"args['city']"``), ``offset`` (in that string) and ``code_point``.
    """

    def __init__(self, where: str, field: str, offset: int, code_point: int) -> None:
        super().__init__(
            f"{where}: {field or 'the text'} holds a lone surrogate "
            f"U+{code_point:04X} at offset {offset}; expected valid Unicode text "
            f"(UTF-8 cannot encode a lone surrogate: was the text cut inside a "
            f"surrogate pair, or decoded with errors='surrogateescape'?)"
        )
        self.where = where
        self.field = field
        self.offset = offset
        self.code_point = code_point


class WireFormatError(ProcessionError, ValueError):
    """Incoming JSON does not have the shape of a Mastra chunk or message."""


class MissingFieldError(WireFormatError):
    """A required key is absent from a chunk or message JSON object."""

    def __init__(self, what: str, field: str, data: object) -> None:
        super().__init__(f"{what} is missing the required field {field!r}: {data!r}")
        self.what = what
        self.field = field


class UnknownChunkTypeError(WireFormatError):
    """A chunk's ``type`` is not one procession knows."""

    def __init__(self, type_: object, data: object) -> None:
        super().__init__(
            f"unknown chunk type {type_!r} in {data!r}; expected one of the Mastra "
            f"chunk types (e.g. 'text-delta', 'tool-call') or 'data-<name>'"
        )
        self.type = type_


class ToolArgumentsError(ProcessionError, ValueError):
    """Tool-call arguments do not match the tool's input schema."""

    def __init__(self, tool_name: str, problem: str) -> None:
        super().__init__(f"arguments for tool {tool_name!r} are invalid: {problem}")
        self.tool_name = tool_name
        self.problem = problem


class ProcessorError(ProcessionError):
    """A processor hook raised a plain exception and its policy is ``"raise"``.

    The original exception is ``__cause__``.
    """

    def __init__(self, processor_id: str, hook: str, error: BaseException) -> None:
        super().__init__(f"processor {processor_id!r} failed in {hook}: {error!r}")
        self.processor_id = processor_id
        self.hook = hook


class ProviderError(ProcessionError):
    """A model provider failed: an HTTP error, an error event in a stream, or a
    dropped connection.

    Args:
        message: what went wrong, in words.
        status_code: the HTTP status, when there was a response.
        headers: the response headers (read case-insensitively), e.g. Retry-After.
        body: the provider's error body (an Anthropic error JSON, an OpenAI
            Responses ``error`` / ``response.failed`` event, ...).
        is_retryable: whether the provider marks the error retryable (None: unknown).
        code: a transport code such as ``"ECONNRESET"``, or the provider's error code.

    The original exception, if any, is ``__cause__``. Error processors read these
    fields through the whole cause chain. The message and the body are
    redacted (``procession._secrets``): a provider that echoes the API key or a
    URL password in its error text never passes it on.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        is_retryable: bool | None = None,
        code: str | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self.body = redact_deep(body)
        self.is_retryable = is_retryable
        self.code = code

    def __repr__(self) -> str:
        fields = [repr(self.message)]
        for name in ("status_code", "is_retryable", "code"):
            value = getattr(self, name)
            if value is not None:
                fields.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(fields)})"


class ProviderStatusError(ProviderError):
    """The provider answered with an HTTP error status; ``status_code`` is set.

    Raised on entering ``model.stream(...)``. ``body`` is the provider's error
    JSON (or its text), ``code`` its error type or code.
    """

    status_code: int

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        is_retryable: bool | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(
            message,
            status_code=status_code,
            headers=headers,
            body=body,
            is_retryable=is_retryable,
            code=code,
        )


class RateLimitError(ProviderStatusError):
    """HTTP 429: too many requests or tokens (``Retry-After`` is in ``headers``).

    An exhausted quota (OpenAI's ``insufficient_quota``) is a 429 too, with
    ``is_retryable=False``.
    """


class OverloadedError(ProviderStatusError):
    """The provider is overloaded: HTTP 529 (Anthropic's ``overloaded_error``),
    or a 503 whose error code or message says "overloaded" (as OpenAI's "That
    model is currently overloaded ..." does).

    An ``overloaded_error`` event inside a 200 stream is a
    ``ProviderStreamError`` with that ``code``: no error status came with it.
    """


class ProviderTimeoutError(ProviderError):
    """Connecting, or reading the response, took longer than the client's
    timeout (``code="timeout"``; no ``status_code``)."""


class ModelIdleTimeout(ProviderTimeoutError):
    """The model stream produced no event for ``idle_timeout`` seconds.

    Measured between stream *events*, not bytes (a server dripping bytes does
    not reset it). Retryable (``is_retryable=True``, ``code="timeout"``), like
    the other timeouts: ``StreamErrorRetryProcessor`` retries it. The message
    names the limit and how to change it.
    """

    def __init__(self, idle_timeout: float, *, provider: str | None = None) -> None:
        source = f"the {provider} model stream" if provider else "the model stream"
        super().__init__(
            f"{source} produced no event for {idle_timeout:g} s (the idle "
            f"timeout); to wait longer, set Agent(idle_timeout=...) or pass "
            f"idle_timeout=... to generate()/stream()",
            is_retryable=True,
            code="timeout",
        )
        self.idle_timeout = idle_timeout


class RunDeadlineExceeded(ProviderTimeoutError):
    """The run's total deadline (``run_deadline`` seconds) passed.

    Not retryable (``is_retryable=False``, ``code="run_deadline"``): a retry
    cannot give the time back, so ``StreamErrorRetryProcessor`` never retries
    it, whatever its matchers or ``retry_unknown_errors`` say.
    """

    def __init__(self, run_deadline: float) -> None:
        super().__init__(
            f"the run's deadline of {run_deadline:g} s passed; to allow more time, "
            f"set Agent(run_deadline=...) or pass run_deadline=... to "
            f"generate()/stream()",
            is_retryable=False,
            code="run_deadline",
        )
        self.run_deadline = run_deadline


class ProviderConnectionError(ProviderError):
    """The connection failed: refused (``code="ECONNREFUSED"``), reset or closed
    without a response (``"ECONNRESET"``), or dropped in the middle of the body
    (``"incomplete_chunked_read"``). No ``status_code``."""


class ProviderStreamError(ProviderError):
    """A 200 response that failed as a stream: an error event inside it (``code``
    is the event's error type or code, ``body`` the event), data that is not
    JSON (``code="invalid_response"``), a JSON answer where an event stream was
    expected, or a body that ended without its final event
    (``code="incomplete_stream"``). No ``status_code``."""


class EventTooLargeError(ProviderStreamError):
    """One server-sent event grew past the model's ``max_event_bytes`` before it
    ended (``code="event_too_large"``, not retryable: the same request would
    likely bring the same event). Raised as soon as the limit is crossed, not
    when the event ends. ``limit`` is the setting, ``size`` the bytes of the
    event seen so far; the message says how to raise the limit."""

    def __init__(self, *, provider: str, limit: int, size: int, setting: str) -> None:
        super().__init__(
            f"{provider} sent a server-sent event larger than the limit of "
            f"{limit} bytes ({size} bytes so far, and it has not ended); if such "
            f"events are expected, raise the limit: {setting}",
            is_retryable=False,
            code="event_too_large",
        )
        self.limit = limit
        self.size = size


class MCPServerError(ProcessionError):
    """An MCP server failed (``procession.mcp``). ``server`` is its display
    name (never a URL's credentials, a header or an environment value: no
    message, repr or log line of these errors carries a secret); ``tool`` the
    tool called, when there was a call."""

    def __init__(self, message: str, *, server: str, tool: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class MCPConnectionError(MCPServerError):
    """The MCP server would not start or connect, or the connection dropped:
    during a call (which is not retried: it may have run), or for good (the
    one reconnection failed too). Not an ``OSError``, for the reason
    ``ProviderConnectionError`` is not one."""


class MCPTimeoutError(MCPServerError):
    """The MCP server did not answer within ``connect_timeout`` (starting,
    connecting, listing its tools) or ``call_timeout`` (one tool call, which
    is cancelled on the server)."""


class MCPToolError(MCPServerError):
    """A tool call came back as an error (``isError``, or a JSON-RPC error):
    the message is the server's text, which the model reads as the tool's
    error, as Mastra passes it on."""


class StorageError(ProcessionError):
    """Conversation memory's database failed (``procession.memory``).

    Raised by the storages and the memory processors; the original driver
    exception, if any, is ``__cause__``. No message, repr or log line of these
    errors carries a database password.
    """


class StorageUnavailableError(StorageError):
    """The database cannot be used now: it is unreachable, the file cannot be
    opened, or the connection dropped in the middle of a transaction (which was
    rolled back: nothing of it is written). Not an ``OSError``, for the reason
    ``ProviderConnectionError`` is not one."""


class StorageLockedError(StorageUnavailableError):
    """A SQLite database file stayed locked by another connection (another
    process) for longer than the storage's busy timeout; nothing was written."""


class SchemaVersionError(StorageError):
    """The memory tables carry a schema version this procession does not use.

    ``found`` is the database's version, ``expected`` this procession's. An
    older schema says to run ``await storage.migrate()``; a newer one says to
    upgrade procession.
    """

    def __init__(self, found: int, expected: int, where: str) -> None:
        if found < expected:
            todo = (
                "run `await storage.migrate()` once (it upgrades the tables in "
                "place), then retry"
            )
        else:
            todo = (
                "this database was upgraded by a newer procession; upgrade "
                "procession to use it"
            )
        super().__init__(
            f"the memory schema in {where} is version {found}, this procession "
            f"uses version {expected}: {todo}"
        )
        self.found = found
        self.expected = expected


class ThreadOwnershipError(StorageError):
    """A thread id names a thread owned by another resource. Threads are never
    readable or writable across resources; nothing was read or written."""

    def __init__(self, thread_id: str, resource_id: str) -> None:
        super().__init__(
            f"thread {thread_id!r} belongs to another resource than "
            f"{resource_id!r}; use a thread id of your own (threads are never "
            f"shared across resources)"
        )
        self.thread_id = thread_id
        self.resource_id = resource_id


class MissingThreadError(StorageError, ValueError):
    """Memory is on but the call named no thread (or no resource): pass
    ``memory={"thread": ..., "resource": ...}``."""


class WaitingRunError(ProcessionError):
    """Answering a run that waits for a person went wrong."""


class WaitingRunNotFound(WaitingRunError, LookupError):
    """No run of this agent waits under the id (it never paused, it was
    another agent's or another resource's, or its storage is elsewhere).
    A run whose waiting call was already answered raises
    ``ApprovalAlreadyDecided`` instead."""

    def __init__(self, run_id: str, agent_id: str) -> None:
        super().__init__(
            f"no run {run_id!r} of agent {agent_id!r} is waiting to be answered"
        )
        self.run_id = run_id
        self.agent_id = agent_id


class ApprovalAlreadyDecided(WaitingRunError):
    """The tool call was answered already: an answer is applied exactly once
    (a second one, or a second replica answering at the same moment, gets
    this, never a second execution). ``decision`` is what was decided:
    ``"approved"``, ``"declined"``, ``"expired"`` or ``"resumed"``."""

    def __init__(self, run_id: str, tool_call_id: str, decision: str) -> None:
        super().__init__(
            f"tool call {tool_call_id!r} of run {run_id!r} was already answered "
            f"({decision}); an answer is applied once"
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.decision = decision


class ToolCallNotPendingError(WaitingRunError, ValueError):
    """The tool call id names no call the run waits on (or none was given and
    several wait); ``pending`` lists the ids that do."""

    def __init__(self, run_id: str, message: str, pending: tuple[str, ...]) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.pending = pending


class SnapshotError(ProcessionError, TypeError):
    """A run cannot pause, or a durable run cannot keep its checkpoint: a
    value it must keep is not JSON (a processor's per-run ``state``, the
    request context). The message names where."""


class ToolInterruptedError(ProcessionError, RuntimeError):
    """A durable run's tool call was running when the process executing the
    run stopped, and the tool is not ``idempotent``: it is not run again (it
    may have had its effect, or not); the model gets this as the call's
    error."""

    def __init__(self, tool_name: str, tool_call_id: str) -> None:
        super().__init__(
            f"tool {tool_name!r} (call {tool_call_id!r}) was interrupted: the "
            f"process running it stopped before it returned, and the tool is not "
            f"marked idempotent, so it was not run again; whether it took effect "
            f"is unknown"
        )
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id


class NoRunStorageError(ConfigurationError):
    """A run must pause (a tool call needs approval, or a tool suspended
    itself) but its agent has no storage to keep the waiting run in: give the
    agent ``memory=Memory(storage=...)`` or ``storage=...``."""


class TripWire(BaseException):
    """Raised by ``args.abort()``: a processor stops the run (or asks for a retry).

    Attributes:
        reason: why, shown to the client as ``tripwire.payload.reason``.
        retry: whether the processor asks the agent to retry the step with the
            reason as feedback (honoured only within the retry budget).
        metadata: structured data attached to the tripwire chunk, passed unchanged.
        processor_id: the id of the processor whose ``abort`` fired. The runtime
            fills it in when a processor raises a ``TripWire`` without one.
    """

    def __init__(
        self,
        reason: str,
        *,
        retry: bool = False,
        metadata: Any = None,
        processor_id: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.metadata = metadata
        self.processor_id = processor_id

    def __repr__(self) -> str:
        return (
            f"TripWire({self.reason!r}, retry={self.retry!r}, "
            f"metadata={self.metadata!r}, processor_id={self.processor_id!r})"
        )
