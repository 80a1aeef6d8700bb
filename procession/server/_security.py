"""Who a request acts for (bearer tokens, or the app's ``authenticate``
hook), what it may name (run and chat ids, scoped to their owner), and CORS;
checked before any route runs.

A request acts for a *principal*: a resource id (a token tied to a resource,
``tok@resource``, or what ``authenticate`` returned), or any resource the
request names (no auth configured, or a token not tied to a resource). Every
run belongs to the principal's resource that started it: its keys in the
registry and on the run bus carry the owner (``run_key``, ``chat_key``), so a
request of another resource cannot find, read, cancel or stop it, and two
resources choosing the same run or chat id never meet.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Final, TypeAlias
from urllib.parse import quote

import attrs

from .._errors import ConfigurationError
from .._secrets import register_secret
from ._http import Headers, HttpError, Scope, request_header

__all__ = [
    "ANYONE",
    "TOKENS_ENV",
    "Authenticate",
    "Authenticator",
    "Cors",
    "Principal",
    "Token",
    "chat_key",
    "check_bind",
    "check_id",
    "check_token",
    "is_loopback",
    "resolve_tokens",
    "run_key",
]

TOKENS_ENV: Final = "PROCESSION_SERVER_TOKENS"
"""Comma-separated bearer tokens the server accepts (when ``tokens=`` is not
given to ``create_app``); ``token@resource`` ties a token to a resource."""


@attrs.frozen
class Token:
    """One accepted bearer token and the resource it acts for (``None``: any
    resource the request names). The secret never shows in a repr."""

    secret: bytes = attrs.field(repr=False)
    resource: str | None = None


def _token(secret: object, resource: object) -> Token | None:
    if not isinstance(secret, str):
        raise ConfigurationError(
            f"tokens must be strings, got a {type(secret).__name__}"
        )
    if resource is not None and (not isinstance(resource, str) or not resource):
        raise ConfigurationError(
            f"a token's resource must be a non-empty string, got {resource!r}"
        )
    if not secret.strip():
        return None
    register_secret(secret)  # never in an error, frame or log line
    return Token(secret.strip().encode(), resource)


def resolve_tokens(
    tokens: Iterable[str] | Mapping[str, str | None] | None,
) -> tuple[Token, ...]:
    """The accepted tokens: ``tokens`` (a list of tokens, or a mapping of
    token to the resource it acts for), or else those in
    ``$PROCESSION_SERVER_TOKENS``: comma-separated entries ``token`` or
    ``token@resource`` (split at the first ``@``; blank entries ignored).
    None of them is ever logged or shown in a repr."""
    if tokens is None:
        out = []
        for entry in os.environ.get(TOKENS_ENV, "").split(","):
            secret, at, resource = entry.partition("@")
            token = _token(secret, resource.strip() if at else None)
            if token is not None:
                out.append(token)
        return tuple(out)
    if isinstance(tokens, str):
        raise ConfigurationError(
            "tokens must be a list of strings, not one string; pass [token]"
        )
    pairs = (
        tokens.items() if isinstance(tokens, Mapping) else ((t, None) for t in tokens)
    )
    resolved = (_token(secret, resource) for secret, resource in pairs)
    return tuple(token for token in resolved if token is not None)


def check_token(scope: Scope, tokens: Sequence[Token]) -> Token | None:
    """Pass when no tokens are configured (``None``) or the request carries
    ``Authorization: Bearer <one of them>`` (that token); else
    ``HttpError(401)``. Every token is compared, each in constant time
    (``hmac.compare_digest``), so the answer's timing says nothing about
    which one nearly matched."""
    if not tokens:
        return None
    header = request_header(scope, b"authorization") or b""
    scheme, _, given = header.partition(b" ")
    given = given.strip()
    matched: Token | None = None
    for token in tokens:
        if hmac.compare_digest(given, token.secret) and matched is None:
            matched = token
    if scheme.lower() != b"bearer" or matched is None:
        raise HttpError(
            401,
            "missing or invalid bearer token",
            headers=[(b"www-authenticate", b'Bearer realm="procession"')],
        )
    return matched


@attrs.frozen
class Principal:
    """Who a request acts for: ``resource``, a resource id (the request reads
    and runs only that resource's threads and runs), or None: any resource
    the request names (no auth configured, or a token not tied to one). Runs
    started by a principal without a resource belong to no resource: every
    such principal reaches them, a principal with a resource never does."""

    resource: str | None = None


ANYONE: Final = Principal()
"""The principal of a request on an app without auth (and of the page)."""

Authenticate: TypeAlias = Callable[[dict[str, str]], Awaitable[str | None] | str | None]
"""``create_app(authenticate=...)``: given the request's headers (lower-case
names; repeated headers joined with ``", "``), the resource id the request
acts for, or None to refuse it (401). May be sync or async."""

_UNAUTHORIZED: Final = (
    "missing or invalid credentials",
    [(b"www-authenticate", b'Bearer realm="procession"')],
)


@attrs.frozen
class Authenticator:
    """The app's auth: static bearer ``tokens``, or the ``hook``, or neither
    (every request acts for ``ANYONE``). Never shows a token in a repr."""

    tokens: tuple[Token, ...] = attrs.field(default=(), repr=False)
    hook: Authenticate | None = None

    def __attrs_post_init__(self) -> None:
        if self.hook is not None and not callable(self.hook):
            raise ConfigurationError(
                f"authenticate must be a callable of the request's headers, got "
                f"{self.hook!r}"
            )

    @property
    def required(self) -> bool:
        """Whether requests need credentials."""
        return bool(self.tokens) or self.hook is not None

    async def principal(self, scope: Scope) -> Principal:
        """Whom the request acts for; ``HttpError(401)`` when its credentials
        are missing or refused. A hook that raises is not a refusal: its
        exception goes up (the app answers 500 and logs it). Checkpoints only
        in an async hook."""
        if self.hook is None:
            token = check_token(scope, self.tokens)
            return ANYONE if token is None else Principal(token.resource)
        outcome = self.hook(_header_map(scope))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome is None:
            message, headers = _UNAUTHORIZED
            raise HttpError(401, message, headers=headers)
        if not isinstance(outcome, str) or not outcome:
            raise TypeError(
                f"authenticate must return a resource id (a non-empty str) or "
                f"None, got a {type(outcome).__name__}"
            )
        return Principal(outcome)


def _header_map(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw_key, raw_value in scope.get("headers", ()):
        key = bytes(raw_key).decode("latin-1").lower()
        value = bytes(raw_value).decode("latin-1")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


def check_id(value: str, field: str) -> str:
    """``value`` if it is a valid client-given run or chat id (1 to 128 of
    ``A-Z a-z 0-9 _ . -``), else ``HttpError(400)`` naming ``field``."""
    if not _ID.fullmatch(value):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise HttpError(
            400,
            f"'{field}' must be 1 to 128 characters of A-Z a-z 0-9 _ . -, got "
            f"{shown!r} ({len(value)} characters)",
            field=field,
        )
    return value


def _scoped(kind: str, owner: str | None, ident: str) -> str:
    # Quoted, the owner holds no ':' and never the '*' of "no resource".
    return f"{kind}:{'*' if owner is None else quote(owner, safe='')}:{ident}"


def run_key(owner: str | None, run_id: str) -> str:
    """The key of run ``run_id`` of resource ``owner`` (None: no resource),
    in the app's registry and on the run bus."""
    return _scoped("run", owner, run_id)


def chat_key(owner: str | None, chat_id: str) -> str:
    """The key of chat ``chat_id`` of resource ``owner`` on the run bus."""
    return _scoped("chat", owner, chat_id)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, has_tokens: bool, insecure: bool) -> None:
    """Refuse (``ConfigurationError``) to serve a non-loopback ``host`` with no
    bearer token configured, unless ``insecure``: with no token anyone who can
    reach the address could run the agents on your API keys."""
    if has_tokens or insecure or is_loopback(host):
        return
    raise ConfigurationError(
        f"refusing to serve {host!r} without authentication: set "
        f"{TOKENS_ENV} (comma-separated bearer tokens) or pass tokens=, or "
        f"bind 127.0.0.1, or pass --insecure if this network is trusted"
    )


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        return (values,)
    return tuple(values)


@attrs.frozen(kw_only=True)
class Cors:
    """CORS, off unless given to ``create_app(cors=...)``: the allowed origins
    (``"*"`` for any), and what a preflight allows."""

    allow_origins: tuple[str, ...] = attrs.field(converter=_strings)
    allow_headers: tuple[str, ...] = attrs.field(
        converter=_strings, default=("authorization", "content-type")
    )
    allow_methods: tuple[str, ...] = attrs.field(
        converter=_strings, default=("GET", "POST", "OPTIONS")
    )
    max_age_s: int = 600

    def origin_headers(self, scope: Scope) -> Headers:
        """The ``access-control-allow-origin`` header for this request's
        origin, or none when the origin is not allowed."""
        origin = request_header(scope, b"origin")
        if origin is None:
            return []
        text = origin.decode("latin-1")
        if "*" in self.allow_origins:
            return [(b"access-control-allow-origin", b"*")]
        if text in self.allow_origins:
            return [(b"access-control-allow-origin", origin), (b"vary", b"origin")]
        return []

    def preflight_headers(self, scope: Scope) -> Headers:
        allowed = self.origin_headers(scope)
        if not allowed:
            return []
        return [
            *allowed,
            (b"access-control-allow-methods", ", ".join(self.allow_methods).encode()),
            (b"access-control-allow-headers", ", ".join(self.allow_headers).encode()),
            (b"access-control-max-age", str(self.max_age_s).encode()),
        ]
