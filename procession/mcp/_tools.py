"""``MCPTools``: the tools of one MCP server, as ``MCPTool`` objects
(``_tool``) an agent calls through its ordinary tool path.

One connection per ``MCPTools``, held by a task of its own from ``async
with`` to its end (the official ``mcp`` SDK's ``Client``; it is built on
anyio and runs on trio). Calls share it, multiplexed by JSON-RPC request id:
a cancelled call sends ``notifications/cancelled`` and leaves the connection
as it was for the next. A dropped connection (the server process exited, the
HTTP transport failed) is re-opened once, at once; a call in flight when it
dropped fails (it may have run), a call that arrives while it re-opens waits
for it. A tool list that changes (``notifications/tools/list_changed``, or
``subscriptions/listen`` on a 2026-07-28 connection) is listed again; a call
during which the server said so returns once the new list is in place, so
the agent's next step offers it.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Self

import trio

from .._errors import (
    ConfigurationError,
    MCPConnectionError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
    ToolSourceNotOpenError,
)
from ..runtime.tools import ToolContext
from ._secrets import (
    LOG_REDACTION,
    command_display,
    secrets_of,
    split_url,
    url_display,
)
from ._tool import (
    ApprovalPolicy,
    MCPTool,
    check_approval,
    make_tools,
    result_text,
    result_value,
)
from ._transport import ServerSpec, follows_changes_by_listening, open_client

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["MCPTools"]

logger: Final = logging.getLogger("procession.mcp")

_PREFIX: Final = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}")
_LIST_PAGES: Final = 100
"""Most ``tools/list`` pages read in one listing (a paginator that never ends
cannot hang the connection)."""
_CONNECTION_CLOSED: Final = -32000  # mcp_types.CONNECTION_CLOSED
_INVALID_REQUEST: Final = -32600
_SESSION_GONE: Final = re.compile(r"session (terminated|not found)", re.IGNORECASE)
"""What a streamable-HTTP server says of a session it does not know (it
restarted): the call never ran."""


def _seconds(owner: str, name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(
            f"MCPTools {owner!r}: {name} must be a positive number of seconds or "
            f"None (no limit), got {value!r}"
        )
    return float(value)


def _strings(value: object, what: str, owner: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        # Not the value itself: it may be a secret.
        raise ConfigurationError(
            f"MCPTools {owner}: {what} must be a mapping of str to str, got a "
            f"{type(value).__name__}"
        )
    return dict(value)


def _leaf(error: BaseException) -> BaseException:
    """The first non-group exception in ``error``."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class _Connection:
    """One live connection: the SDK client and whether it dropped."""

    __slots__ = ("client", "generation", "lost", "modern")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.lost = trio.Event()
        self.client: Client | None = None
        self.modern = False


class MCPTools:
    """The tools of one MCP server, for an agent's ``tools=`` list.

    ``MCPTools(command=["npx", "-y", "@modelcontextprotocol/server-github"])``
    runs a server as a subprocess speaking stdio; ``MCPTools(url=...)``
    connects to one over streamable HTTP. ``async with MCPTools(...) as mcp:``
    holds the connection (one, shared by every call and every agent that
    lists ``mcp``); ``create_app`` / ``procession serve`` open the
    ``MCPTools`` of their agents in the app's lifespan. Used while not open,
    it is a ``ToolSourceNotOpenError`` naming it.

    Args:
        command: the server's command line, a list (``env`` and ``cwd`` for
            its process; it inherits only ``HOME``, ``PATH``, ``USER`` and
            such, as the SDK does).
        url: the server's streamable-HTTP endpoint; ``headers`` go with every
            request (a URL's ``user:password@`` becomes basic auth).
        name: what messages call the server (default: the executable and its
            first plain argument, or the URL's host and path; never a secret).
        prefix: ``prefix="gh"`` offers the server's ``search`` as
            ``gh_search``. Without it the tools keep the server's names (an
            invalid character becomes ``_``).
        require_approval: a bool, or ``predicate(name, args, context)`` (the
            server's name of the tool); each ``MCPTool`` carries it as its
            ``require_approval``. Annotations never require approval by
            themselves.
        connect_timeout: seconds to start, connect and list the tools (and to
            re-list them); past it, ``MCPTimeoutError``. ``None``: no limit.
        call_timeout: seconds one call may take; past it the call is
            cancelled on the server and fails with ``MCPTimeoutError`` (the
            model sees a tool error). ``None``: no limit.
        protocol: ``"auto"`` (ask for protocol 2026-07-28, fall back to the
            initialize handshake of earlier servers) or ``"legacy"`` (the
            handshake only).

    Needs the ``mcp`` extra (``pip install "procession[mcp]"``).

    Raises:
        ConfigurationError: naming the argument, at construction.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        name: str | None = None,
        prefix: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        require_approval: ApprovalPolicy = False,
        connect_timeout: float | None = 30.0,
        call_timeout: float | None = 60.0,
        protocol: Literal["auto", "legacy"] = "auto",
    ) -> None:
        _require_sdk()
        if (command is None) == (url is None):
            raise ConfigurationError(
                "MCPTools needs exactly one of command=[...] (a server over stdio) "
                "or url=... (streamable HTTP)"
            )
        password: str | None = None
        user: str | None = None
        query_values: list[str] = []
        if command is not None:
            if isinstance(command, str) or not (
                isinstance(command, Sequence)
                and command
                and all(isinstance(part, str) and part for part in command)
            ):
                raise ConfigurationError(
                    f"MCPTools command must be a non-empty list of str, e.g. "
                    f"['npx', '-y', '@modelcontextprotocol/server-filesystem', '.'], "
                    f"got {type(command).__name__}"
                    + (
                        " (split the string into a list)"
                        if isinstance(command, str)
                        else ""
                    )
                )
            display = command_display(command)
            if headers is not None:
                raise ConfigurationError(
                    f"MCPTools {display!r}: headers= is for url=; a command's "
                    f"server takes env="
                )
        else:
            if not isinstance(url, str) or not re.match(r"https?://", url):
                shown = url_display(url) if isinstance(url, str) else url
                raise ConfigurationError(
                    f"MCPTools url must be an http:// or https:// URL, got {shown!r}"
                )
            display = url_display(url)
            url, user, password, query_values = split_url(url)
            if env is not None or cwd is not None:
                raise ConfigurationError(
                    f"MCPTools {display!r}: env= and cwd= are for command=; a "
                    f"URL's server takes headers="
                )
        if name is not None:
            if not isinstance(name, str) or not name.strip():
                raise ConfigurationError(
                    f"MCPTools name must be a non-empty str, got {name!r}"
                )
            display = name
        if prefix is not None and (
            not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix)
        ):
            raise ConfigurationError(
                f"MCPTools {display!r}: prefix must be 1 to 32 letters, digits, '_' "
                f"or '-' (starting with a letter or digit), got {prefix!r}"
            )
        if protocol not in ("auto", "legacy"):
            raise ConfigurationError(
                f"MCPTools {display!r}: protocol must be 'auto' or 'legacy', got "
                f"{protocol!r}"
            )
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigurationError(
                f"MCPTools {display!r}: cwd must be a str, got {cwd!r}"
            )
        self._name = display
        self._env = _strings(env, "env", repr(display))
        self._headers = _strings(headers, "headers", repr(display))
        self._spec = ServerSpec(
            command=tuple(command) if command is not None else None,
            url=url,
            env=self._env,
            cwd=cwd,
            headers=self._headers,
            basic_auth=(user or "", password or "") if user or password else None,
        )
        self.prefix = prefix
        self.require_approval: ApprovalPolicy = check_approval(require_approval)
        self.connect_timeout = _seconds(display, "connect_timeout", connect_timeout)
        self.call_timeout = _seconds(display, "call_timeout", call_timeout)
        self.protocol = protocol
        self._redact = secrets_of(
            env=self._env,
            headers=self._headers,
            password=password,
            query_values=query_values,
        )
        self._reset()

    def _reset(self) -> None:
        self._open = False
        self._closing = False
        self._stack = AsyncExitStack()
        self._connecting: trio.CancelScope | None = None
        self._live: _Connection | None = None
        self._ready = trio.Event()
        self._failure: MCPServerError | None = None
        self._tools: tuple[MCPTool, ...] = ()
        self._list_wanted = 0
        self._list_done = 0
        self._list_dirty = trio.Event()
        self._list_settled = trio.Event()

    # --- ToolSource ------------------------------------------------------------

    @property
    def name(self) -> str:
        """What messages call the server (never a secret)."""
        return self._name

    @property
    def is_open(self) -> bool:
        return self._open and self._failure is None

    def tools(self) -> Sequence[MCPTool]:
        """The server's tools as last listed. Pure.

        Raises:
            ToolSourceNotOpenError: not open (or the connection failed for
                good, which the message says).
        """
        if not self._open:
            raise ToolSourceNotOpenError(
                f"{self!r} is not open: enter it (`async with mcp:`) before a run "
                f"uses its tools, or serve its agent with create_app / procession "
                f"serve, which open it"
            )
        if self._failure is not None:
            raise ToolSourceNotOpenError(f"{self!r} is closed: {self._failure}")
        return self._tools

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<MCPTools {self._name!r} {state}>"

    async def __aenter__(self) -> Self:
        """Start or connect to the server and list its tools. Checkpoints;
        bounded by ``connect_timeout``; a cancellation leaves it closed.

        Raises:
            ConfigurationError: it is open already.
            MCPConnectionError: the server would not start or connect.
            MCPTimeoutError: it did not answer within ``connect_timeout``.
        """
        if self._open:
            raise ConfigurationError(f"{self!r} is open already; enter it once")
        self._reset()
        self._open = True
        stack = self._stack
        try:
            LOG_REDACTION.register(self, self._redact)
            stack.callback(LOG_REDACTION.unregister, self)
            nursery = await stack.enter_async_context(trio.open_nursery())
            await nursery.start(self._hold)
        except BaseException:
            self._stop()
            self._open = False
            await stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Close the connection (a subprocess gets its stdin closed, then
        SIGTERM and SIGKILL after bounded waits). Checkpoints; its cleanup
        finishes even when cancelled."""
        self._stop()
        try:
            # Not the body's exception: the nursery would wrap it in a group.
            await self._stack.aclose()
        finally:
            self._open = False
        return None

    def _stop(self) -> None:
        """Make the connection's task end: close the live connection, or stop
        opening one."""
        self._closing = True
        live = self._live
        if live is not None:
            live.lost.set()
        if self._connecting is not None:
            self._connecting.cancel()
        self._ready.set()

    # --- the connection's task ---------------------------------------------------

    async def _hold(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Open the connection, list the tools, then watch it until it drops
        or the ``MCPTools`` closes; re-open it once per drop. A failure of
        the first opening propagates (to ``__aenter__``); of a re-opening, it
        closes the ``MCPTools`` for good (its calls say why)."""
        generation = 0
        while True:
            conn = _Connection(generation)
            started = False
            error: MCPServerError | None = None
            with trio.CancelScope(deadline=self._deadline()) as connecting:
                self._connecting = connecting
                if self._closing:
                    return
                try:
                    async with (
                        self._client(conn) as client,
                        trio.open_nursery() as watchers,
                    ):
                        conn.client = client
                        if follows_changes_by_listening(client):
                            # Before listing: a change made after the listing
                            # must reach the subscription (it replays nothing).
                            await watchers.start(self._listen, client)
                        tools = await self._list(client)
                        connecting.deadline = math.inf
                        self._connecting = None
                        self._tools = tools
                        self._live = conn
                        started = True
                        self._ready.set()
                        if generation == 0:
                            task_status.started()
                        else:
                            logger.info("MCP server %s: reconnected", self._name)
                        watchers.start_soon(self._relist_when_dirty, client)
                        await conn.lost.wait()
                        watchers.cancel_scope.cancel()
                except Exception as exc:
                    error = self._connection_error(exc, started)
                finally:
                    self._connecting = None
                    self._mark_lost(conn)
            if self._closing:
                return
            if connecting.cancelled_caught and not started:
                error = MCPTimeoutError(
                    f"MCP server {self._name!r} did not start and list its tools "
                    f"within connect_timeout={self.connect_timeout:g} s",
                    server=self._name,
                )
            if not started:
                assert error is not None
                if generation == 0:
                    raise error
                self._failure = MCPConnectionError(
                    f"the connection to MCP server {self._name!r} dropped and could "
                    f"not be re-opened: {error}",
                    server=self._name,
                )
                logger.error("%s", self._failure)
                self._ready.set()
                return
            logger.warning(
                "MCP server %s: the connection dropped%s; re-opening it",
                self._name,
                f" ({error})" if error is not None else "",
            )
            generation += 1

    def _deadline(self) -> float:
        if self.connect_timeout is None:
            return math.inf
        return trio.current_time() + self.connect_timeout

    def _client(self, conn: _Connection) -> AbstractAsyncContextManager[Client]:
        async def on_message(message: Any) -> None:
            await self._on_message(message)

        return open_client(
            self._spec,
            protocol=self.protocol,
            on_end=lambda: self._mark_lost(conn),
            on_message=on_message,
        )

    async def _on_message(self, message: Any) -> None:
        """The session's notifications: a changed tool list is listed again.
        Runs in the connection's reader: does not block."""
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._want_listing()
        await trio.lowlevel.checkpoint()

    def _want_listing(self) -> None:
        self._list_wanted += 1
        self._list_dirty.set()

    def _mark_lost(self, conn: _Connection) -> None:
        """``conn`` dropped: callers wait for the re-opened one."""
        if conn.lost.is_set():
            return
        conn.lost.set()
        if self._live is conn:
            self._live = None
            if not self._closing:
                self._ready = trio.Event()

    async def _listen(
        self, client: Client, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """On a 2026-07-28 connection, list changes come on a
        ``subscriptions/listen`` stream; started once the server acknowledged
        it (or refused it: then changes are not followed, and a warning says
        so)."""
        acknowledged = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                acknowledged = True
                task_status.started()
                async for _event in subscription:
                    self._want_listing()
        except Exception as exc:
            logger.warning(
                "MCP server %s: its tool-list changes are not followed (%s)",
                self._name,
                self._describe(exc),
            )
            if not acknowledged:
                task_status.started()

    async def _relist_when_dirty(self, client: Client) -> None:
        while True:
            await self._list_dirty.wait()
            self._list_dirty = trio.Event()
            wanted = self._list_wanted
            with trio.move_on_after(self.connect_timeout or math.inf):
                try:
                    self._tools = await self._list(client)
                except Exception as exc:
                    logger.warning(
                        "MCP server %s: listing its changed tools failed (%s)",
                        self._name,
                        self._describe(exc),
                    )
            self._list_done = wanted
            settled, self._list_settled = self._list_settled, trio.Event()
            settled.set()

    async def _list(self, client: Client) -> tuple[MCPTool, ...]:
        listed: list[Any] = []
        cursor: str | None = None
        for _page in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        return make_tools(
            listed,
            server=self._name,
            prefix=self.prefix,
            approval=self.require_approval,
            executor=self._executor,
        )

    # --- calls -------------------------------------------------------------------

    def _executor(self, server_name: str) -> Callable[[Any, ToolContext], Any]:
        async def execute(args: Any, context: ToolContext) -> Any:
            return await self.call(server_name, args, tool_name=context.tool_name)

        execute.__qualname__ = f"MCPTools.call[{server_name}]"
        return execute

    async def call(
        self,
        server_name: str,
        arguments: Mapping[str, Any],
        *,
        tool_name: str | None = None,
    ) -> Any:
        """Call tool ``server_name`` (its name on the server) and return its
        result: the text of its content (what MCP means for a model), or the
        content blocks as JSON when there is more than text (images,
        resources). Checkpoints; bounded by ``call_timeout``. A cancellation
        cancels the call on the server (``notifications/cancelled``) and
        leaves the connection usable.

        Raises:
            MCPToolError: the server answered with an error (its text).
            MCPTimeoutError: no answer within ``call_timeout``.
            MCPConnectionError: the connection dropped during the call (it is
                not retried: it may have run), or for good.
            ToolSourceNotOpenError: not open.
        """
        shown = tool_name or server_name
        for attempt in (1, 2):
            conn = await self._connection()
            client = conn.client
            assert client is not None
            try:
                with trio.fail_after(self.call_timeout or math.inf):
                    result = await client.call_tool(server_name, dict(arguments))
            except trio.TooSlowError:
                raise MCPTimeoutError(
                    f"MCP server {self._name!r}: tool {shown!r} did not answer within "
                    f"call_timeout={self.call_timeout:g} s (the call was cancelled)",
                    server=self._name,
                    tool=shown,
                ) from None
            except Exception as exc:
                code = getattr(exc, "code", None)
                if code == _CONNECTION_CLOSED or self._is_transport_failure(exc):
                    self._mark_lost(conn)
                    raise self._error(
                        MCPConnectionError,
                        f"MCP server {self._name!r}: the connection dropped during the "
                        f"call of {shown!r} (not retried: it may have run)",
                        exc,
                        tool=shown,
                    ) from None
                if (
                    code == _INVALID_REQUEST
                    and _SESSION_GONE.search(str(exc))
                    and attempt == 1
                ):
                    # The server forgot the session (it restarted): the call
                    # never ran. Re-open and send it again, once.
                    self._mark_lost(conn)
                    continue
                raise self._error(
                    MCPToolError,
                    f"MCP server {self._name!r}: tool {shown!r} failed",
                    exc,
                    tool=shown,
                ) from None
            await self._await_listing()
            if result.is_error:
                raise MCPToolError(
                    self._redact(
                        result_text(result.content) or f"tool {shown!r} failed"
                    ),
                    server=self._name,
                    tool=shown,
                )
            return result_value(result)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _connection(self) -> _Connection:
        """The live connection, waiting while it re-opens."""
        while True:
            if not self._open or self._closing:
                raise ToolSourceNotOpenError(
                    f"{self!r} is not open: its tools are called only inside "
                    f"`async with`"
                )
            if self._failure is not None:
                raise MCPConnectionError(str(self._failure), server=self._name)
            conn = self._live
            if conn is not None and not conn.lost.is_set():
                return conn
            await self._ready.wait()

    async def _await_listing(self) -> None:
        """If the server said its tool list changed, wait (bounded) until it
        is listed again: the next step offers the new list."""
        if self._list_done >= self._list_wanted:
            return
        with trio.move_on_after(self.connect_timeout or math.inf):
            while self._list_done < self._list_wanted:
                await self._list_settled.wait()

    # --- errors ------------------------------------------------------------------

    @staticmethod
    def _is_transport_failure(exc: BaseException) -> bool:
        import httpx2

        return isinstance(_leaf(exc), httpx2.TransportError | OSError)

    def _describe(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        text = str(leaf)
        return self._redact(
            f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
        )

    def _error(
        self,
        kind: type[MCPServerError],
        message: str,
        cause: BaseException,
        *,
        tool: str | None = None,
    ) -> MCPServerError:
        """``kind`` saying ``message`` and what ``cause`` was (redacted); the
        cause is chained only when its text carries no secret."""
        leaf = _leaf(cause)
        error = kind(f"{message}: {self._describe(leaf)}", server=self._name, tool=tool)
        if not self._redact.contains_secret(str(leaf)):
            error.__cause__ = leaf
        return error

    def _connection_error(self, exc: Exception, started: bool) -> MCPServerError:
        if isinstance(exc, MCPServerError):
            return exc
        if started:
            return self._error(
                MCPConnectionError,
                f"MCP server {self._name!r}: the connection failed",
                exc,
            )
        where = "start" if self._spec.command is not None else "connect"
        return self._error(
            MCPConnectionError, f"MCP server {self._name!r} would not {where}", exc
        )


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401 - only whether the extra is installed
    except ImportError as exc:
        raise ConfigurationError(
            f'MCPTools needs the mcp extra: pip install "procession[mcp]" ({exc})'
        ) from exc
