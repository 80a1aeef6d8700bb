"""Every core: ``procession serve --workers N``, N processes sharing one
listening socket the way hypercorn's own multi-worker mode does (the parent
binds it; each worker accepts on it; the kernel hands each connection to one
of them).

* The parent only supervises: it binds, starts the workers (fresh
  interpreters running the same command with ``--worker``), and waits.
  SIGTERM or SIGINT to the parent is passed on to every worker (each ends its
  streams, as one process does) and the parent exits once they have, within
  the graceful timeout + 1 s (a worker still there then is killed).
* A worker whose parent died (even by ``kill -9``) sees its end of a pipe
  close and exits within 1 s: its streams end, its runs are cancelled (one
  still starting exits at once). Not ``PR_SET_PDEATHSIG``: trio starts
  processes from a worker thread, and that signal fires when the thread
  that forked exits, which an idle thread cache's thread does.
* Workers are not recycled: one that exits on its own stops the others, and
  the parent exits non-zero, naming it.
* What lives in one process does not cross workers: the concurrent-runs
  limit is per worker; without a bus a run is cancelled only by the worker
  that runs it (elsewhere the cancel route is a 404 that says so); resume
  needs a bus shared by the workers (``--bus``): the in-process bus is refused
  at start. Memory's one turn per thread at a time holds across workers (a
  lease row in the storage).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import attrs
import trio

from .._errors import ConfigurationError
from ._app import ProcessionApp
from ._bus import InProcessRunBus

__all__ = [
    "WorkerSpec",
    "bind_listener",
    "check_workers",
    "die_with_parent",
    "listener_url",
    "parse_workers",
    "serve_worker",
    "serve_workers",
    "supervise_workers",
]

logger: Final = logging.getLogger("procession.server")

PARENT_GONE_EXIT_S: Final = 0.25
"""A worker whose parent died ends its streams and stops within this long."""


def parse_workers(text: str) -> int:
    """``--workers``'s value: a count >= 1, or ``auto`` (the cores this
    process may run on). ``ConfigurationError`` naming the option
    otherwise."""
    if text == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # pragma: no cover - not on Linux
            return max(1, os.cpu_count() or 1)
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ConfigurationError(f"--workers takes a count >= 1 or 'auto', got {text!r}")


def check_workers(app: ProcessionApp, workers: int) -> None:
    """``ConfigurationError`` when ``app`` cannot be served by ``workers``
    processes: resume on the in-process bus (a resuming client may land on
    another worker, which has not got the run's log)."""
    if workers > 1 and isinstance(app.bus, InProcessRunBus):
        raise ConfigurationError(
            f"--workers {workers} cannot serve create_app(resume=True) on the "
            f"in-process bus (a resuming client may land on another worker): "
            f"give the workers a shared bus (--bus redis://...) or serve with "
            f"--workers 1"
        )


@attrs.frozen
class WorkerSpec:
    """What a worker is told by its parent: its number (from 1) of
    ``count``, the listening socket's fd, the fd whose EOF says the parent
    died and the fd to write one byte to once it serves. Written
    ``index/count/listen_fd/parent_fd/ready_fd``."""

    index: int
    count: int
    listen_fd: int
    parent_fd: int
    ready_fd: int

    def __str__(self) -> str:
        return (
            f"{self.index}/{self.count}/{self.listen_fd}/{self.parent_fd}/"
            f"{self.ready_fd}"
        )

    def watch_parent(self) -> None:
        """Call first thing in the worker: see ``die_with_parent``."""
        die_with_parent(self.parent_fd)

    @classmethod
    def parse(cls, text: str) -> WorkerSpec:
        """The spec ``str(spec)`` wrote; ``ConfigurationError`` otherwise."""
        parts = text.split("/")
        if len(parts) != 5 or not all(p.isdigit() for p in parts):
            raise ConfigurationError(
                f"--worker takes index/count/listen_fd/parent_fd/ready_fd, got {text!r}"
            )
        index, count, listen_fd, parent_fd, ready_fd = map(int, parts)
        return cls(index, count, listen_fd, parent_fd, ready_fd)


def bind_listener(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port), set up as
    hypercorn sets up its own (``TCP_NODELAY``, ``SO_REUSEADDR``,
    ``SO_REUSEPORT`` for several workers), inheritable by the workers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def listener_url(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve_workers(
    host: str,
    port: int,
    workers: int,
    command: Callable[[WorkerSpec], Sequence[str]],
    announce: Callable[[str, list[int]], None],
    *,
    backlog: int = 1024,
    graceful_timeout_s: float = 5.0,
) -> int:
    """Be the parent of ``--workers N``: bind ``host:port``, run the workers
    (``command(spec)`` each), call ``announce(url, pids)`` once every worker
    serves, and supervise them until a signal or a worker's exit (see the
    module docstring). Blocks (its own ``trio.run``); returns the process's
    exit status. ``OSError`` if the address cannot be bound."""
    listener = bind_listener(host, port, backlog)

    async def supervise() -> int:
        async with trio.open_nursery() as nursery:
            status: list[int] = []

            async def run(task_status: trio.TaskStatus[list[int]]) -> None:
                status.append(
                    await supervise_workers(
                        listener,
                        workers,
                        command,
                        graceful_timeout_s=graceful_timeout_s,
                        task_status=task_status,
                    )
                )

            announce(listener_url(listener), await nursery.start(run))
        return status[0]

    with listener:
        return trio.run(supervise)


async def supervise_workers(
    sock: socket.socket,
    workers: int,
    command: Callable[[WorkerSpec], Sequence[str]],
    *,
    graceful_timeout_s: float = 5.0,
    task_status: trio.TaskStatus[list[int]] = trio.TASK_STATUS_IGNORED,
) -> int:
    """Run ``workers`` processes, each ``command(spec)``, all accepting on
    ``sock``, until SIGINT or SIGTERM (passed on to them as SIGTERM) or
    until one exits. Returns the exit status for the parent: 0 after a
    signal once every worker stopped, 1 when a worker exited on its own (the
    others are stopped). ``task_status.started`` gets the workers' pids.

    Checkpoints; cancelled, it kills the workers before it returns."""
    parent_r, parent_w = os.pipe()
    ready_r, ready_w = os.pipe()
    processes: list[trio.Process] = []
    try:
        for index in range(1, workers + 1):
            spec = WorkerSpec(index, workers, sock.fileno(), parent_r, ready_w)
            processes.append(
                await trio.lowlevel.open_process(
                    list(command(spec)), pass_fds=(sock.fileno(), parent_r, ready_w)
                )
            )
        for fd in (parent_r, ready_w):
            os.close(fd)
        parent_r = ready_w = -1
        if not await _all_ready(processes, ready_r):
            return await _until_stopped(processes, graceful_timeout_s, signalled=False)
        task_status.started([p.pid for p in processes])
        return await _until_stopped(processes, graceful_timeout_s)
    finally:
        with trio.CancelScope(shield=True):
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        for fd in (parent_r, ready_w, ready_r, parent_w):
            if fd >= 0:
                os.close(fd)


def _watch_exits(
    nursery: trio.Nursery, processes: list[trio.Process], exited: list[trio.Process]
) -> None:
    """A task per worker in ``nursery``: when it exits, it goes in ``exited``
    and the nursery is cancelled."""

    async def watch(process: trio.Process) -> None:
        await process.wait()
        exited.append(process)
        nursery.cancel_scope.cancel()

    for process in processes:
        nursery.start_soon(watch, process)


async def _all_ready(processes: list[trio.Process], ready_r: int) -> bool:
    """Until every worker wrote its byte (True) or one exited first."""
    ready = trio.lowlevel.FdStream(os.dup(ready_r))
    exited: list[trio.Process] = []
    async with ready, trio.open_nursery() as nursery:
        _watch_exits(nursery, processes, exited)
        seen = 0
        while seen < len(processes):
            data = await ready.receive_some(len(processes) - seen)
            if not data:
                break
            seen += len(data)
        nursery.cancel_scope.cancel()
    return seen == len(processes) and not exited


async def _until_stopped(
    processes: list[trio.Process], graceful_timeout_s: float, *, signalled: bool = True
) -> int:
    """Wait for a signal or a worker's exit (only the latter unless
    ``signalled``); then stop them all (SIGTERM, then up to the graceful
    timeout + 0.5 s); the parent's exit status."""
    exited: list[trio.Process] = []
    async with trio.open_nursery() as nursery:
        _watch_exits(nursery, processes, exited)
        if signalled:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _signal in signals:
                    break
            nursery.cancel_scope.cancel()
    status = 0
    if exited:
        gone = exited[0]
        print(
            f"procession serve: worker {processes.index(gone) + 1} (pid {gone.pid}) "
            f"exited with {gone.returncode}; stopping the others",
            file=sys.stderr,
            flush=True,
        )
        status = 1
    for process in processes:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
    with trio.move_on_after(graceful_timeout_s + 0.5):
        for process in processes:
            await process.wait()
    return status


async def serve_worker(
    app: ProcessionApp,
    spec: WorkerSpec,
    serve_on: Callable[[socket.socket, trio.TaskStatus[object]], Awaitable[None]],
) -> bool:
    """Be worker ``spec``: ``serve_on(listener, task_status)`` (an ``await
    serve(app, sock=listener, task_status=...)``) until it returns, telling
    the parent once it serves; when the parent's pipe closes (the parent
    died), end the streams and stop within ``PARENT_GONE_EXIT_S``; True
    then (the caller should exit at once: ``os._exit``, skipping the
    interpreter's teardown, ~0.5 s on a loaded machine). Checkpoints."""
    app.workers = spec.count
    listener = socket.socket(fileno=spec.listen_fd)
    _SERVING.set()
    orphaned: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def parent_gone() -> None:
            await trio.lowlevel.wait_readable(spec.parent_fd)
            orphaned.append(True)
            logger.warning("worker %d: the parent process is gone", spec.index)
            app.begin_shutdown()
            nursery.cancel_scope.deadline = trio.current_time() + PARENT_GONE_EXIT_S

        async def serving(task_status: trio.TaskStatus[None]) -> None:
            await serve_on(listener, task_status)  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()

        nursery.start_soon(parent_gone)
        await nursery.start(serving)
        os.write(spec.ready_fd, b"r")
        os.close(spec.ready_fd)
    return bool(orphaned)


_SERVING = threading.Event()


def die_with_parent(parent_fd: int) -> None:
    """While this worker starts (imports, the app, binding its server), a
    thread waits for the parent's pipe to close and, if the worker is not
    serving yet, ends the process at once: a worker killed with its parent
    mid-start does not linger. Once ``serve_worker`` watches the pipe itself
    (ending the streams first), the thread leaves it to that."""

    def watch() -> None:
        try:
            while os.read(parent_fd, 1):
                pass
        except OSError:
            return
        if not _SERVING.is_set():
            os._exit(1)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()
