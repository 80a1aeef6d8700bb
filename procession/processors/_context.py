"""Small objects every hook receives: request context, tracing context, the abort
signal, the stream writer and violations."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, overload

import attrs
import trio

from .._errors import ProcessorContractError
from ..wire import from_wire

if TYPE_CHECKING:
    from ..data import Chunk

__all__ = [
    "AbortSignal",
    "CollectingEmitter",
    "Emitter",
    "OnViolation",
    "ProcessorStreamWriter",
    "ProcessorViolation",
    "RequestContext",
    "StreamParts",
    "TracingContext",
]


class RequestContext(dict[str, Any]):
    """Request-scoped values (thread id, resource id, user settings...).

    A plain ``dict`` with Mastra's ``get``/``set`` spelling, so the seed's
    ``request_context.get("blockedWords")`` reads the same in Python.
    """

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        self[key] = value

    @property
    def thread_id(self) -> str | None:
        value = self.get("thread_id", self.get("threadId"))
        return value if isinstance(value, str) else None

    @property
    def resource_id(self) -> str | None:
        value = self.get("resource_id", self.get("resourceId"))
        return value if isinstance(value, str) else None


@attrs.frozen(kw_only=True)
class TracingContext:
    """Where a hook call sits in a trace (for observability integrations)."""

    trace_id: str | None = None
    span_id: str | None = None
    attributes: Mapping[str, Any] = attrs.field(factory=dict)


class AbortSignal:
    """Tells a hook that its run is being cancelled (Mastra's ``abortSignal``).

    Cheap to read (``signal.aborted``); ``await signal.wait()`` parks until the run
    is cancelled. The runtime sets it; processors only read it.
    """

    __slots__ = ("_event", "_reason")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._reason: str | None = None

    @property
    def aborted(self) -> bool:
        """Whether the run has been cancelled."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why the run was cancelled, once it was."""
        return self._reason

    async def wait(self) -> None:
        """Park until the run is cancelled. Checkpoints."""
        await self._event.wait()

    def set(self, reason: str) -> None:
        """Mark the run cancelled (runtime use). Idempotent: the first reason stays."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted!r}, reason={self._reason!r})"


@attrs.frozen(kw_only=True)
class ProcessorViolation:
    """What ``on_violation`` receives: a policy violation a processor detected,
    whether it blocked (a tripwire) or only warned (``report_violation``)."""

    processor_id: str
    message: str
    detail: Any = None
    blocking: bool = False
    """True when the violation is the tripwire that ended (or retried) the run."""


class Emitter(Protocol):
    """Where a hook's side outputs go. The runtime supplies one per hook call
    site so custom chunks and violations keep their position in the stream."""

    def emit_custom(self, processor_id: str, chunk: Chunk) -> None: ...

    def emit_violation(self, violation: ProcessorViolation) -> None: ...


class ProcessorStreamWriter:
    """``args.writer``: send custom chunks to the client from inside a hook.

    ``await writer.custom({"type": "data-moderation", "data": {...}})`` puts the
    chunk into the output stream at the position of the chunk being processed
    (custom chunks do not pass through later processors). A ``data-*`` chunk with
    ``transient=True`` is streamed but never persisted. Pass ``transient`` as a
    property of the chunk, as the seed says, not as an argument.
    """

    __slots__ = ("_emitter", "_processor_id")

    def __init__(self, emitter: Emitter, processor_id: str) -> None:
        self._emitter = emitter
        self._processor_id = processor_id

    async def custom(self, chunk: Chunk | Mapping[str, Any]) -> None:
        """Emit ``chunk``, a ``data-*`` chunk or an ``object-result`` (a chunk
        object or its Mastra wire dict). Checkpoints.

        Raises:
            WireFormatError: a dict that is not a valid chunk.
            ProcessorContractError: a chunk of any other type (a ``tripwire``,
                a ``finish``...), naming the processor and the type: a
                processor forwarding JSON must not be able to forge the run's
                own chunks.
        """
        self.custom_nowait(chunk)
        await trio.lowlevel.checkpoint()

    def custom_nowait(self, chunk: Chunk | Mapping[str, Any]) -> None:
        """Like ``custom`` but synchronous, for sync hooks. Never blocks: custom
        chunks ride in-band with the chunk being processed."""
        if isinstance(chunk, Mapping):
            chunk = from_wire(chunk)
        kind = getattr(chunk, "type", None)
        # An ``object-result`` (a structured-output value, Mastra's
        # StructuredOutputProcessor's) is custom output too; it is the result's
        # ``object``.
        if kind == "object-result":
            self._emitter.emit_custom(self._processor_id, chunk)
            return
        if not (isinstance(kind, str) and kind.startswith("data-")):
            raise ProcessorContractError(
                self._processor_id,
                "writer.custom",
                f"accepts only 'data-*' chunks, got {_type_name(chunk, kind)}; "
                f"the run's own chunks (tripwire, finish, error...) cannot be "
                f"written as custom output",
            )
        self._emitter.emit_custom(self._processor_id, chunk)

    def __repr__(self) -> str:
        return f"ProcessorStreamWriter(processor_id={self._processor_id!r})"


class StreamParts(Sequence["Chunk"]):
    """``args.stream_parts``: a read-only, live view of the chunks one processor
    was shown in this run (discarded attempts excluded), the current one last.

    It reads like a list (``len``, indexing, slicing, iteration, ``in``) and
    never copies: the runtime appends to the list behind it, so the view a
    hook keeps sees later chunks too. Slicing returns a new list. Changing it
    (``append``, ``clear``, item assignment...) raises ``TypeError``: what a
    processor was shown is not its to rewrite, and the view is shared with
    the runtime's own bookkeeping.
    """

    __slots__ = ("_parts",)

    def __init__(self, parts: list[Chunk]) -> None:
        self._parts = parts

    def __len__(self) -> int:
        return len(self._parts)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...

    @overload
    def __getitem__(self, index: slice) -> list[Chunk]: ...

    def __getitem__(self, index: int | slice) -> Chunk | list[Chunk]:
        return self._parts[index]

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self._parts)

    def __reversed__(self) -> Iterator[Chunk]:
        return reversed(self._parts)

    def __contains__(self, value: object) -> bool:
        return value in self._parts

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StreamParts):
            return self._parts == other._parts
        if isinstance(other, list | tuple):
            return self._parts == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, so unhashable like them

    def __repr__(self) -> str:
        return f"StreamParts({self._parts!r})"

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "stream_parts is a read-only view of the chunks this processor was "
            "shown; return a chunk (or a list of chunks) to change the stream, "
            "or keep your own list in args.state"
        )

    append = extend = insert = remove = pop = clear = _read_only
    sort = reverse = __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only


def _type_name(chunk: object, kind: object) -> str:
    if isinstance(kind, str):
        return f"a {kind!r} chunk"
    return f"{chunk!r}, which is not a chunk"


class CollectingEmitter:
    """An ``Emitter`` that keeps what it is given, in order (for hooks outside the
    stream and for tests)."""

    __slots__ = ("custom", "violations")

    def __init__(self) -> None:
        self.custom: list[tuple[str, Chunk]] = []
        self.violations: list[ProcessorViolation] = []

    def emit_custom(self, processor_id: str, chunk: Chunk) -> None:
        self.custom.append((processor_id, chunk))

    def emit_violation(self, violation: ProcessorViolation) -> None:
        self.violations.append(violation)


OnViolation = Callable[[ProcessorViolation], Any]
