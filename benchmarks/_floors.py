"""The floors ``server_load.py`` measures procession's server against, each a
server in its own process sending the same SSE bytes a procession stream of
the workload sends (``start``, ``step-start``, ``text-start``, the deltas,
``text-end``, ``step-finish``, ``finish``, ``[DONE]``), with no agent:

    python benchmarks/_floors.py hypercorn-one --port P
    python benchmarks/_floors.py hypercorn-batched --port P  # 16 frames a send
    python benchmarks/_floors.py raw-trio --port P     # one send_all per frame

``hypercorn-*`` is an ASGI app on hypercorn's trio worker (what procession
serve runs on); ``raw-trio`` a trio socket server speaking just enough
HTTP/1.1 (keep-alive, a chunked body). Each request says its workload in its
body as ``_served.py`` reads it (``chunks=200 pace=20``: 200 deltas, 20 ms
before each). Prints ``ready <port>`` once it listens; runs until SIGTERM.
The garbage collector is tuned as ``procession serve`` tunes its own
(``procession.server.tune_gc``), so a floor and procession differ only in
what they run per request.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import signal
from collections.abc import Sequence
from typing import Any

import trio

from procession.server import tune_gc

RUN_ID = "run-" + "0" * 32
BATCH = 16


def _frame(kind: str, payload: dict[str, Any]) -> bytes:
    wire = {"type": kind, "runId": RUN_ID, "from": "AGENT", "payload": payload}
    return b"data: " + json.dumps(wire, separators=(",", ":")).encode() + b"\n\n"


_WORKLOAD = re.compile(rb"chunks=(\d+)(?: pace=([\d.]+))?")


def workload(body: bytes) -> tuple[int, float]:
    """The deltas and the pace (seconds) a request body asks for."""
    match = _WORKLOAD.search(body)
    if match is None:
        return 200, 0.0
    return int(match[1]), float(match[2] or 0) / 1000


@functools.cache
def frames(chunks: int) -> tuple[list[bytes], bytes, list[bytes]]:
    """The stream's frames: the ones before the deltas, one delta, the ones
    after (``[DONE]`` last)."""
    head = [
        _frame("start", {}),
        _frame("step-start", {"messageId": "msg-" + "0" * 32}),
        _frame("text-start", {"id": "t"}),
    ]
    delta = _frame("text-delta", {"id": "t", "text": "x " if chunks > 1 else "ok"})
    usage = {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}
    tail = [
        _frame("text-end", {"id": "t"}),
        _frame(
            "step-finish",
            {"stepResult": {"reason": "stop"}, "output": {"usage": usage}},
        ),
        _frame(
            "finish", {"stepResult": {"reason": "stop"}, "output": {"usage": usage}}
        ),
        b"data: [DONE]\n\n",
    ]
    return head, delta, tail


HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


def hypercorn_app(batch: int) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        chunks, pace_s = workload(body)
        head, delta, tail = frames(chunks)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        out = [*head]
        for _ in range(chunks):
            if pace_s:
                await trio.sleep(pace_s)
            out.append(delta)
            if len(out) >= batch:
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"".join(out),
                        "more_body": True,
                    }
                )
                out = []
        out += tail
        await send({"type": "http.response.body", "body": b"".join(out)})

    return app


async def serve_hypercorn(port: int, batch: int) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.backlog = 4096

    async def started(task_status: trio.TaskStatus[Any]) -> None:
        await serve(
            hypercorn_app(batch),
            config,
            shutdown_trigger=_terminated,
            task_status=task_status,
        )

    async with trio.open_nursery() as nursery:
        await nursery.start(started)
        print(f"ready {port}", flush=True)


async def _terminated() -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            return


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


async def serve_raw(port: int) -> None:
    """Minimal HTTP/1.1: read a request (headers and a content-length body),
    answer 200 with a chunked SSE body, one ``send_all`` per frame; keep the
    connection for the next request."""
    start = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    async def handle(stream: trio.SocketStream) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                header, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                chunks, pace_s = workload(buffer[:length])
                head, delta, tail = frames(chunks)
                buffer = buffer[length:]
                await stream.send_all(start + _chunk(b"".join(head)))
                for _ in range(chunks):
                    if pace_s:
                        await trio.sleep(pace_s)
                    await stream.send_all(_chunk(delta))
                await stream.send_all(_chunk(b"".join(tail)) + b"0\r\n\r\n")
        except trio.BrokenResourceError:
            return

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1", backlog=4096)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handle, listeners)
        print(f"ready {port}", flush=True)
        await _terminated()
        nursery.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "kind", choices=["hypercorn-one", "hypercorn-batched", "raw-trio"]
    )
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    tune_gc()  # as procession serve does
    if args.kind == "raw-trio":
        trio.run(serve_raw, args.port)
    else:
        trio.run(
            serve_hypercorn, args.port, BATCH if args.kind.endswith("batched") else 1
        )


if __name__ == "__main__":
    main()
