"""Serving an app with hypercorn's trio worker, and loading what
``procession serve module:attr`` names."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import pathlib
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import trio

from .._errors import ConfigurationError
from ..runtime import Agent
from ._app import ProcessionApp
from ._create import create_app
from ._security import check_bind

__all__ = ["GC_THRESHOLD", "load_target", "serve", "tune_gc"]

GC_THRESHOLD: Final = 10_000
"""The collector's first threshold ``procession serve`` sets (Python's is
700): container objects allocated, net, between two young collections."""


async def serve(
    app: ProcessionApp,
    *,
    host: str = "127.0.0.1",
    port: int = 4111,
    insecure: bool = False,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
    backlog: int = 1024,
    graceful_timeout_s: float = 5.0,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` with hypercorn's trio worker, in the
    caller's trio run, until ``shutdown_trigger()`` returns (default: SIGINT
    or SIGTERM). ``await nursery.start(serve, app, port=0)`` returns the
    bound URLs (port 0 picks a free one).

    With no bearer token configured, a non-loopback ``host`` is refused
    (``ConfigurationError``) unless ``insecure``. On shutdown the open streams
    are ended first (``app.begin_shutdown()``: an ``abort`` chunk, then
    ``[DONE]``); hypercorn then waits up to ``graceful_timeout_s`` for the
    connections to close. Cancelling the caller stops the server at once
    (connections closed, runs cancelled). Needs the ``server`` extra
    (hypercorn).

    With ``sock`` (a listening socket, as ``procession serve --workers``
    hands each worker), it serves on that socket instead of binding
    ``host:port`` (which then only names the address for ``check_bind``), as
    a worker of hypercorn's own multi-worker mode does.
    """
    check_bind(host, has_tokens=app.auth_required, insecure=insecure)
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve
    except ImportError as exc:  # pragma: no cover - the extra is in dev
        raise ConfigurationError(
            f'serving needs the server extra: pip install "procession[server]" ({exc})'
        ) from exc
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.backlog = backlog
    config.graceful_timeout = graceful_timeout_s
    trigger = shutdown_trigger or _signalled

    async def shutdown() -> None:
        await trigger()
        app.begin_shutdown()

    if sock is not None:
        from hypercorn.config import Sockets
        from hypercorn.trio.run import worker_serve
        from hypercorn.utils import wrap_app

        await worker_serve(
            # hypercorn types the app with its own scope TypedDicts; ours is
            # the plain ASGI mapping form of the same protocol.
            wrap_app(app, config.wsgi_max_body_size, "asgi"),  # type: ignore[arg-type]
            config,
            sockets=Sockets([], [sock], []),
            shutdown_trigger=shutdown,
            task_status=task_status,
        )
        return
    await hypercorn_serve(
        app,  # type: ignore[arg-type]
        config,
        shutdown_trigger=shutdown,
        task_status=task_status,
    )


def tune_gc(threshold: int = GC_THRESHOLD) -> None:
    """Tune the garbage collector for a process that serves, as ``procession
    serve`` does once its app is loaded: collect what start-up left, freeze
    every object alive now (the modules, the agents, the app: ``gc.freeze()``,
    so no later collection walks them again), and set the first
    generation's threshold to ``threshold`` (the other two are kept).

    A served run allocates a few thousand container objects; at Python's
    700 that is several young collections per request, each older
    collection walking the whole start-up heap again. On a one-chunk answer
    this halves the server's CPU per request (``benchmarks/README.md``).
    Garbage in cycles lives a little longer (up to ``threshold`` objects).

    It changes the whole process: call it from the program that owns the
    process (``procession serve`` does), not from a library. ``threshold``
    must be an int >= 1 (``ConfigurationError`` otherwise)."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ConfigurationError(
            f"tune_gc: threshold must be an int >= 1, got {threshold!r}"
        )
    gc.collect()
    gc.freeze()
    _first, second, third = gc.get_threshold()
    gc.set_threshold(threshold, second, third)


async def _signalled() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _signal in signals:
            return


def load_target(
    target: str,
    *,
    cwd_on_path: bool = True,
    bus: str | None = None,
    durable: bool = False,
) -> ProcessionApp:
    """The app that ``target`` (``"module:attr"`` or ``"path/file.py:attr"``)
    names: an app as it is, or an agent or a list of agents served by
    ``create_app`` (with ``bus=bus``: a ``redis://`` URL; ``durable``: their
    runs durable). Raises ``ConfigurationError`` saying what was found, or for
    a bus or ``durable`` given with an app (which chose its own in
    ``create_app``)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(
            f"serve takes module:attr (e.g. myapp.agents:agent), got {target!r}"
        )
    if cwd_on_path and "" not in sys.path:
        sys.path.insert(0, "")
    module = _import(module_name)
    try:
        value: Any = getattr(module, attr)
    except AttributeError:
        raise ConfigurationError(f"{module_name} has no attribute {attr!r}") from None
    if isinstance(value, ProcessionApp):
        if bus is not None:
            raise ConfigurationError(
                f"{target} is an app: give it its bus in create_app(bus=...), not --bus"
            )
        if durable:
            raise ConfigurationError(
                f"{target} is an app: make it durable in create_app(durable=True), "
                f"not --durable"
            )
        return value
    if isinstance(value, Agent):
        return create_app([value], bus=bus, durable=durable)
    if (
        isinstance(value, Sequence)
        and value
        and all(isinstance(v, Agent) for v in value)
    ):
        return create_app(value, bus=bus, durable=durable)
    raise ConfigurationError(
        f"{target} is {value!r}; expected an Agent, a list of agents or an app "
        f"from create_app"
    )


def _import(name: str) -> Any:
    if name.endswith(".py"):
        path = pathlib.Path(name)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None or not path.exists():
            raise ConfigurationError(f"cannot load {name}: no such file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"cannot import {name!r}: {exc}") from exc
