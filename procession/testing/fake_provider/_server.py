"""The fake provider's h11/trio server: read requests, answer from the script.

``open_fake_provider(script)`` serves, on ``127.0.0.1`` and a port the OS picks,
the three streaming endpoints procession's providers call (``/v1/messages``,
``/v1/chat/completions``, ``/v1/responses``); every request to one of them takes
the next turn of the one script.

Why trio sockets and h11 rather than an ASGI server: the point of this server is
fault injection, and several faults need byte- and socket-level control that ASGI
cannot express (close after reading the request without answering, stop inside a
chunked body, split an event across writes, stall after the headers). ``h11`` is
a small sans-I/O HTTP/1.1 state machine; it is already a dependency of
``httpcore2`` (and so of the ``anthropic`` SDK and ``httpx2``), so it adds nothing
to an install with the provider extras; the ``testing`` extra names it
explicitly. Everything else is trio: the server lives in a nursery owned by the
``async with`` block and is gone when the block ends.

Writes go straight to the socket, as ``SocketStream.send_all`` does them (a
non-blocking send, then waiting until the socket is writable), but here the wait
is noted in the ``ConnectionLog``: a client that stops reading stalls the server
once the socket buffers fill, ``ConnectionLog.events_sent`` shows how far the
stream got (nothing is queued here), and ``ConnectionLog.wait_stalled`` wakes a
test at the moment it happens.

Use the real clock with this server: under ``MockClock(autojump_threshold=0)`` a
task blocked on socket I/O counts as idle and the clock would jump, firing the
client's timeouts early.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

try:
    import h11
except ImportError:  # (a test imports it in a subprocess without h11)
    raise ImportError(
        "procession.testing.fake_provider needs h11, which is not installed: "
        'pip install "procession[testing]"',
        name="h11",
    ) from None
import trio

from ..._errors import ProcessionError
from ..._headers import Headers
from ._render_anthropic import anthropic_events
from ._render_openai import chat_events, responses_events
from ._script import Endpoint, Fault, HttpError, RecordedRequest, Stream, Turn, _Raw

__all__ = [
    "ConnectionLog",
    "FakeProvider",
    "FakeProviderError",
    "open_fake_provider",
]

_ROUTES: dict[str, Endpoint] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
}
_READ_SIZE = 65536
_SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"


class FakeProviderError(ProcessionError, AssertionError):
    """The fake provider's script did not match what the client did.

    Raised when the ``open_fake_provider`` block exits: the script ran out (a
    request got the scripted 500), turns were left unused, or a callable turn
    raised. It derives from ``AssertionError`` because it is a failed test
    expectation, not a library error.
    """


# --------------------------------------------------------------------------
# One connection


@attrs.define
class ConnectionLog:
    """What happened on one TCP connection; updated while it is open.

    ``events_sent`` counts SSE events (and error bodies) written to the socket
    in full: with a client that stops reading it stops growing once the socket
    buffers are full. ``finished_response`` is True when the last response
    started on the connection was sent completely. ``closed_by_client`` is True
    when the client went away (EOF, reset) rather than the server closing or
    shutting down. ``wait_closed`` and ``wait_stalled`` wait for those moments
    without polling.
    """

    opened_at: float
    closed_by_client: bool = False
    bytes_sent: int = 0
    events_sent: int = 0
    finished_response: bool = False
    responses: int = 0
    closed_at: float | None = None
    # Why the server is not sending right now: a write the client's full
    # buffers refuse, or a ``stall_after`` fault. Set and cleared by the server.
    _stall: Literal["write", "fault"] | None = attrs.field(
        default=None, init=False, repr=False, eq=False
    )
    _socket: trio.socket.SocketType | None = attrs.field(
        default=None, init=False, repr=False, eq=False
    )
    # Set, and replaced by a fresh one, on every change of the two above and of
    # ``closed_at``: the waiters re-check their condition each time.
    _changed: trio.Event = attrs.field(
        factory=trio.Event, init=False, repr=False, eq=False
    )

    async def wait_closed(self) -> None:
        """Park until the connection is closed, by either side (``closed_at`` is
        then set; ``closed_by_client`` says whether the client went first).

        The server notices a client's close on its next read or write; a
        connection the client keeps open (a keep-alive pool) closes when the
        ``open_fake_provider`` block ends. Always checkpoints, even when the
        connection is already closed. Cancelling it (a cancel scope, for
        example ``trio.fail_after``) only ends the wait; the connection is left
        as it is.
        """
        await trio.lowlevel.checkpoint()
        while self.closed_at is None:
            await self._changed.wait()

    async def wait_stalled(self) -> None:
        """Park until the server has stopped sending on this connection and
        will send nothing more until the client acts: a write is blocked
        because the client is not reading (the socket buffers are full and the
        kernel says so), a ``Fault(stall_after=n)`` holds the stream, or the
        connection is closed.

        A server idle between two responses is not stalled. Always
        checkpoints, even when it returns at once. Cancelling it (a cancel
        scope, for example ``trio.fail_after``) only ends the wait; the server
        goes on as before.
        """
        await trio.lowlevel.checkpoint()
        while not self._stopped():
            await self._changed.wait()

    def _stopped(self) -> bool:
        if self.closed_at is not None or self._stall == "fault":
            return True
        # A blocked write whose socket is writable again (the client read in
        # the meantime) is about to go on: the server just has not run yet.
        return self._stall == "write" and not _writable(self._socket)

    def _set_stall(self, stall: Literal["write", "fault"] | None) -> None:
        self._stall = stall
        self._note_change()

    def _close(self) -> None:
        self.closed_at = trio.current_time()
        self._stall = None
        self._note_change()

    def _note_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


def _writable(sock: trio.socket.SocketType | None) -> bool:
    """Whether a write to ``sock`` would go on (or fail) now: a zero-timeout
    poll, the readiness trio's ``wait_writable`` waits for."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True  # closing: the server is about to note it
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return bool(poller.poll(0))
    _, ready, _ = select.select([], [fd], [], 0)  # Windows has no poll()
    return bool(ready)


@attrs.define
class _Link:
    """One connection as the server writes to it: the h11 state, the socket
    (trio's, and a stdlib view of the same descriptor for non-blocking sends)
    and its log."""

    conn: h11.Connection
    stream: trio.SocketStream
    raw: socket.socket
    log: ConnectionLog

    async def send(self, event: h11.Response | h11.Data | h11.EndOfMessage) -> None:
        """Write ``event``'s bytes (counted in ``bytes_sent``)."""
        data = self.conn.send(event)
        if data:
            await self._write(data)
            self.log.bytes_sent += len(data)

    async def _write(self, data: bytes) -> None:
        """All of ``data``, the way ``SocketStream.send_all`` writes it, noting
        in the log while a write waits for the client to make room."""
        await trio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(data)
        while view:
            try:
                sent = self.raw.send(view)
            except BlockingIOError:
                self.log._set_stall("write")
                try:
                    await trio.lowlevel.wait_writable(self.stream.socket)
                finally:
                    self.log._set_stall(None)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"the client went away: {exc}") from exc
            view = view[sent:]
        await trio.lowlevel.cancel_shielded_checkpoint()


class _ClientLeft(Exception):
    """The client went away in the middle of something (internal)."""


class FakeProvider:
    """The running server; get one from ``open_fake_provider``.

    Attributes:
        base_url: ``http://127.0.0.1:PORT``, the Anthropic SDK's ``base_url``.
        anthropic_base_url: the same.
        openai_base_url: ``base_url + "/v1"``, the OpenAI ``base_url``.
        requests: every request received, in order (unknown paths included).
        connections: one log per TCP connection, in order of opening.
        problems: what went wrong with the script so far (the script ran out, a
            malformed request), in words; ``strict`` turns these into a
            ``FakeProviderError`` at exit.
    """

    def __init__(self, script: Iterable[Turn], port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}"
        self.anthropic_base_url = self.base_url
        self.openai_base_url = f"{self.base_url}/v1"
        self.requests: list[RecordedRequest] = []
        self.connections: list[ConnectionLog] = []
        self._script: list[Turn] = list(script)
        self._next_turn = 0
        self._arrival = trio.Event()
        self.problems: list[str] = []
        self._callable_errors: list[Exception] = []

    @property
    def remaining(self) -> list[Turn]:
        """The turns not used yet, in order."""
        return self._script[self._next_turn :]

    def push(self, *turns: Turn) -> None:
        """Append turns to the script."""
        self._script.extend(turns)

    async def wait_for_requests(self, n: int) -> None:
        """Park until at least ``n`` requests have been received (read in full).

        Always checkpoints. Cancel it with a cancel scope around the call.
        """
        await trio.lowlevel.checkpoint()
        while len(self.requests) < n:
            await self._arrival.wait()

    def __repr__(self) -> str:
        return (
            f"<FakeProvider {self.base_url} requests={len(self.requests)} "
            f"remaining={len(self.remaining)}>"
        )

    # Per connection -----------------------------------------------------

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        log = ConnectionLog(opened_at=trio.current_time())
        log._socket = stream.socket
        self.connections.append(log)
        # The same descriptor as a stdlib socket, for sends that say when they
        # would block; detached (never closed) so trio's close stays the close.
        raw = socket.socket(fileno=stream.socket.fileno())
        link = _Link(h11.Connection(h11.SERVER), stream, raw, log)
        try:
            while True:
                request = await self._read_request(link.conn, stream)
                if request is None:
                    log.closed_by_client = True
                    return
                keep_open = await self._answer(link, request)
                if not keep_open or link.conn.our_state is h11.MUST_CLOSE:
                    return
                link.conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, _ClientLeft):
            log.closed_by_client = True
        except h11.RemoteProtocolError as exc:
            # A malformed request: not a scripted situation, so it is a problem.
            self.problems.append(f"a client sent a malformed request: {exc}")
        finally:
            raw.detach()
            log._close()
            await trio.aclose_forcefully(stream)

    async def _read_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> RecordedRequest | None:
        """The next request, read to the end of its body; None on a clean EOF."""
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(_READ_SIZE))
            elif isinstance(event, h11.ConnectionClosed):
                return None
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return self._record(head, bytes(body))

    def _record(self, head: h11.Request, body: bytes) -> RecordedRequest:
        target = head.target.decode("latin-1")
        path, _, query = target.partition("?")
        headers = Headers(
            {k.decode("latin-1"): v.decode("latin-1") for k, v in head.headers}
        )
        parsed: Any = body
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = body
        request = RecordedRequest(
            method=head.method.decode("ascii"),
            path=path,
            headers=headers,
            body=parsed,
            received_at=trio.current_time(),
            query=query,
        )
        self.requests.append(request)
        self._arrival.set()
        self._arrival = trio.Event()
        return request

    def _next(self, request: RecordedRequest) -> Stream | HttpError | str:
        """The turn for ``request``, or the text of the 500 to send instead."""
        if self._next_turn >= len(self._script):
            problem = (
                f"the script ran out: request #{len(self.requests)} "
                f"({request.method} {request.path}) found no turn; the script had "
                f"{len(self._script)} turn(s)"
            )
            self.problems.append(problem)
            return f"fake provider: {problem}"
        turn = self._script[self._next_turn]
        self._next_turn += 1
        if isinstance(turn, Stream | HttpError):
            return turn
        try:
            answer: object = turn(request)
        except Exception as exc:
            self._callable_errors.append(exc)
            return f"fake provider: the callable turn {turn!r} raised {exc!r}"
        if not isinstance(answer, Stream | HttpError):
            error = TypeError(
                f"a callable turn must return a Stream or an HttpError, "
                f"{turn!r} returned {answer!r}"
            )
            self._callable_errors.append(error)
            return f"fake provider: {error}"
        return answer

    async def _answer(
        self,
        link: _Link,
        request: RecordedRequest,
    ) -> bool:
        """Answer one request; False when the connection must be closed."""
        ordinal = len(self.requests)
        endpoint = _ROUTES.get(request.path) if request.method == "POST" else None
        if endpoint is None:
            shape: Literal["anthropic", "openai"] = (
                "anthropic"
                if "anthropic-version" in request.headers
                or request.path.startswith("/v1/messages")
                else "openai"
            )
            not_found = HttpError(
                404,
                provider=shape,
                message=f"fake provider: no route for {request.method} {request.path}",
            )
            where: Endpoint = "anthropic" if shape == "anthropic" else "chat"
            return await self._send_error(link, not_found, where, ordinal)
        turn = self._next(request)
        if isinstance(turn, str):
            failure = HttpError(500, message=turn)
            return await self._send_error(link, failure, endpoint, ordinal)
        if isinstance(turn, HttpError):
            return await self._send_error(link, turn, endpoint, ordinal)
        return await self._send_stream(link, turn, endpoint, request, ordinal)

    async def _send_error(
        self,
        link: _Link,
        error: HttpError,
        endpoint: Endpoint,
        ordinal: int,
    ) -> bool:
        request_id = f"req_fake_{ordinal}"
        body = error.render_body(endpoint, request_id=request_id)
        fault = error.fault or Fault()
        headers = {"content-type": "application/json"}
        if fault.truncate_after is None:
            headers["content-length"] = str(len(body))
        headers |= _id_headers(endpoint, request_id)
        headers |= {k.lower(): v for k, v in error.headers.items()}
        return await self._respond(link, error.status, headers, [body], fault)

    async def _send_stream(
        self,
        link: _Link,
        turn: Stream,
        endpoint: Endpoint,
        request: RecordedRequest,
        ordinal: int,
    ) -> bool:
        body = request.body if isinstance(request.body, dict) else {}
        model = body.get("model")
        model = model if isinstance(model, str) else "fake-model"
        events: list[bytes]
        if turn.parts and isinstance(turn.parts[0], _Raw):
            events = [e for p in turn.parts if isinstance(p, _Raw) for e in p.events]
        elif endpoint == "anthropic":
            rendered = anthropic_events(turn, model=model, ordinal=ordinal)
            events = [e.encode() for e in rendered]
        elif endpoint == "chat":
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(
                options.get("include_usage")
            )
            rendered = chat_events(
                turn, model=model, include_usage=include_usage, ordinal=ordinal
            )
            events = [e.encode() for e in rendered]
        else:
            rendered = responses_events(turn, model=model, ordinal=ordinal)
            events = [e.encode() for e in rendered]
        headers = {"content-type": _SSE_CONTENT_TYPE, "cache-control": "no-cache"}
        headers |= _id_headers(endpoint, f"req_fake_{ordinal}")
        headers |= {k.lower(): v for k, v in turn.headers.items()}
        return await self._respond(link, 200, headers, events, turn.fault or Fault())

    async def _respond(
        self,
        link: _Link,
        status: int,
        headers: Mapping[str, str],
        events: Sequence[bytes],
        fault: Fault,
    ) -> bool:
        """Send one response with ``fault``; False when the connection must
        be closed."""
        log = link.log
        if fault.close_without_response:
            log.finished_response = False
            return False
        if fault.headers_delay:
            await trio.sleep(fault.headers_delay)
        log.responses += 1
        log.finished_response = False
        await link.send(h11.Response(status_code=status, headers=[*headers.items()]))
        for i in range(len(events) + 1):
            if fault.stall_after is not None and i == min(
                fault.stall_after, len(events)
            ):
                log._set_stall("fault")
                await _wait_for_client_to_leave(link.stream)
                raise _ClientLeft
            if fault.drop_after is not None and i == min(fault.drop_after, len(events)):
                # Closing the socket inside the chunked body: the client sees
                # EOF without the terminating chunk ("incomplete chunked read").
                return False
            if i == len(events) or i == fault.truncate_after:
                break
            if i and fault.delay_between_events:
                await trio.sleep(fault.delay_between_events)
            data = events[i]
            size = fault.split_frames or len(data) or 1
            for start in range(0, max(len(data), 1), size):
                await link.send(h11.Data(data=data[start : start + size]))
            log.events_sent += 1
        await link.send(h11.EndOfMessage())
        log.finished_response = True
        return True

    def _check(self, *, strict: bool, allow_unused: bool) -> None:
        problems = [f"a callable turn failed: {e!r}" for e in self._callable_errors]
        if strict:
            problems += self.problems
            if self.remaining and not allow_unused:
                problems.append(
                    f"{len(self.remaining)} scripted turn(s) were never used: "
                    f"{self.remaining!r} (pass allow_unused=True if that is expected)"
                )
        if problems:
            error = FakeProviderError(
                "the fake provider's script did not match the requests:\n- "
                + "\n- ".join(problems)
            )
            cause = self._callable_errors[0] if self._callable_errors else None
            raise error from cause


def _id_headers(endpoint: Endpoint, request_id: str) -> dict[str, str]:
    if endpoint == "anthropic":
        return {"request-id": request_id}
    return {"x-request-id": request_id}


async def _wait_for_client_to_leave(stream: trio.SocketStream) -> None:
    """Read (and ignore) until the client closes the connection."""
    while await stream.receive_some(_READ_SIZE):
        pass


@contextlib.asynccontextmanager
async def open_fake_provider(
    script: Iterable[Turn] = (),
    *,
    strict: bool = True,
    allow_unused: bool = False,
) -> AsyncIterator[FakeProvider]:
    """Serve ``script`` on ``127.0.0.1`` (a free port) for the ``async with`` block.

    Each request to one of the three endpoints takes the next turn; any other
    path gets a 404 in the provider's error shape and takes none. When the
    script has run out a request gets a 500 whose message says so.

    On exit the server and its connections are cancelled (a stalled stream
    included). Then, if the block raised nothing, ``FakeProviderError`` is
    raised when a callable turn failed and, with ``strict`` (the default), when
    the script ran out or turns were left unused (unless ``allow_unused``). An
    exception from the block itself propagates unchanged (not in a group).
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = FakeProvider(script, port)
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, server._serve_connection, listeners)
        try:
            yield server
        except BaseException as exc:
            # Re-raised below, outside the nursery, so the caller sees the
            # block's own exception rather than an ExceptionGroup around it.
            body_error = exc
        nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
    server._check(strict=strict, allow_unused=allow_unused)
