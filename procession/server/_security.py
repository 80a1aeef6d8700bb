"""Bearer-token auth and CORS, checked before any route runs."""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from ..processors import ConfigurationError
from ._http import Headers, HttpError, Scope, request_header

__all__ = [
    "TOKENS_ENV",
    "Cors",
    "Token",
    "check_bind",
    "check_token",
    "is_loopback",
    "resolve_tokens",
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
