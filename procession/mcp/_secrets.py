"""What an MCP server is called in messages, and keeping its secrets out of
them.

A server is named by what the user would recognise and nothing secret: a
command by its executable and first plain argument (``npx
@modelcontextprotocol/server-github``), a URL by its host, port and path (no
user, password or query). The secrets an ``MCPTools`` holds (header and
environment values, a URL's password and query values) are redacted from
every message it raises and from the log lines of the HTTP and MCP client
libraries while it is open.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

__all__ = [
    "LOG_REDACTION",
    "REDACTED",
    "SecretRedactor",
    "command_display",
    "secrets_of",
    "split_url",
    "url_display",
]

REDACTED: Final = "[redacted]"

_PLAIN_ARG: Final = re.compile(r"[A-Za-z_@./][\w@./+-]*")
"""An argument worth showing: a script or package name, not a flag, a URL or
``key=value`` (which may carry a secret)."""

_LOGGERS: Final = (
    # httpx2 logs each request's URL (with its query) at INFO.
    "httpx2",
    "mcp.client.streamable_http",
    "mcp.client.stdio",
    "mcp.client.session",
    "mcp.client.client",
    "mcp.shared.jsonrpc_dispatcher",
    "procession.mcp",
)


def command_display(command: Sequence[str]) -> str:
    """``npx @modelcontextprotocol/server-github`` for ``["npx", "-y",
    "@modelcontextprotocol/server-github", "--token", "..."]``: the
    executable's base name and the first argument that is a plain name."""
    shown = os.path.basename(command[0]) or command[0]
    for argument in command[1:]:
        if _PLAIN_ARG.fullmatch(argument):
            return f"{shown} {os.path.basename(argument.rstrip('/')) or argument}"
    return shown


def split_url(url: str) -> tuple[str, str | None, str | None, list[str]]:
    """``url`` without its user and password, the user, the password, and
    the values of its query (secrets a server may take there)."""
    parts = urllib.parse.urlsplit(url)
    user, password = parts.username, parts.password
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    bare = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    values = [v for _k, v in urllib.parse.parse_qsl(parts.query) if v]
    return (
        bare,
        user and urllib.parse.unquote(user),
        password and urllib.parse.unquote(password),
        values,
    )


def url_display(url: str) -> str:
    """``host:port/path`` of ``url``: no scheme, user, password or query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return f"{netloc}{parts.path}".rstrip("/") or netloc


class SecretRedactor:
    """Replaces each of a set of secrets in a text by ``[redacted]``."""

    __slots__ = ("_pattern", "_secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret containing another is redacted whole;
        # very short values (a "1" in a query) would redact noise, not secrets.
        self._secrets = tuple(
            sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
        )
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in self._secrets))
            if self._secrets
            else None
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def contains_secret(self, text: str) -> bool:
        return self._pattern is not None and self._pattern.search(text) is not None


class _LogRedaction(logging.Filter):
    """A filter on the client libraries' loggers that redacts the secrets of
    every open ``MCPTools`` (installed once; each one registers its own)."""

    def __init__(self) -> None:
        super().__init__("procession.mcp.redaction")
        self._lock = threading.Lock()
        self._by_owner: dict[int, SecretRedactor] = {}
        self._installed = False

    def register(self, owner: object, redactor: SecretRedactor) -> None:
        if not redactor:
            return
        with self._lock:
            self._by_owner[id(owner)] = redactor
            if not self._installed:
                for name in _LOGGERS:
                    logging.getLogger(name).addFilter(self)
                self._installed = True

    def unregister(self, owner: object) -> None:
        with self._lock:
            self._by_owner.pop(id(owner), None)

    def filter(self, record: logging.LogRecord) -> bool:
        redactors = list(self._by_owner.values())
        if not redactors:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own handling
            return True
        redacted = message
        for redactor in redactors:
            redacted = redactor(redacted)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


LOG_REDACTION: Final = _LogRedaction()


def secrets_of(
    *,
    env: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
    password: str | None,
    query_values: Sequence[str],
) -> SecretRedactor:
    """The redactor for one server's secrets."""
    found: list[str] = []
    found += (env or {}).values()
    for value in (headers or {}).values():
        found.append(value)
        # "Bearer abc": the credential alone may show up too.
        found += value.split(" ", 1)[1:]
    if password:
        found += [password, urllib.parse.quote(password, safe="")]
    found += query_values
    return SecretRedactor(found)
