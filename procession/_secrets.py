"""No secret leaves: one place that knows the process's secrets and takes them
out of text before it becomes an error message, a repr, a streamed frame, a
log line or a span attribute.

Two helpers, used wherever such text is made:

* ``redact_url(url)``: a URL with the password of its userinfo replaced
  (``redis://user:[redacted]@host:6379/0``); the user name stays, it names the
  account without opening it.
* ``redact(text)``: ``text`` with every registered secret replaced, and every
  URL password and libpq ``password=...`` in it too.

Secrets are registered where they are configured: a provider's API key (the
argument or its environment variable), the server's bearer tokens, the
password of a run bus or storage URL (``register_secret``). A string shorter
than ``MIN_SECRET_LENGTH`` is not registered: replacing it everywhere would
mangle ordinary text, and a credential that short protects nothing. Secrets
live in this process only, for its lifetime (a set, bounded by what the
configuration names).

``RedactingFilter`` is the logging side: every logger of the package carries
it (``get_logger(name)``), so a record's message, arguments and traceback text
are redacted before any handler formats them.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "RedactingFilter",
    "get_logger",
    "redact",
    "redact_deep",
    "redact_url",
    "register_secret",
]

REDACTED: Final = "[redacted]"
MIN_SECRET_LENGTH: Final = 8

# scheme://user:password@  (the password: anything up to the last '@' before
# the host, no white space or '/')
_URL_PASSWORD: Final = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)(?P<password>[^\s/@]+)@"
)
# libpq key=value: password=secret or password='se cret'
_KV_PASSWORD: Final = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?P<password>'(?:[^'\\]|\\.)*'|[^\s]+)",
    re.IGNORECASE,
)


class _Secrets:
    """The registered secrets and one pattern matching any of them (longest
    first, so a secret containing another is replaced whole)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()  # providers may be built in threads

    def add(self, value: str) -> None:
        with self._lock:
            if value in self._values:
                return
            self._values.add(value)
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def sub(self, text: str) -> str:
        pattern = self._pattern
        return text if pattern is None else pattern.sub(REDACTED, text)


_SECRETS: Final = _Secrets()


def register_secret(value: object) -> None:
    """Never show ``value`` (an API key, a token, a password) in an error,
    repr, frame, log line or span of this process. Strings shorter than
    ``MIN_SECRET_LENGTH`` and non-strings are ignored."""
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LENGTH:
        _SECRETS.add(value.strip())


def redact_url(url: str) -> str:
    """``url`` with its userinfo password replaced by ``[redacted]`` (the rest
    as it was); registers that password as a secret, so text that quotes it
    elsewhere (a driver's error) is redacted too."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        register_secret(password)
    return _URL_PASSWORD.sub(rf"\g<head>{REDACTED}@", url)


def redact(text: str) -> str:
    """``text`` with every registered secret, URL password and libpq
    ``password=`` value replaced by ``[redacted]``."""
    text = _SECRETS.sub(text)
    if "://" in text:
        text = _URL_PASSWORD.sub(rf"\g<head>{REDACTED}@", text)
    if "assword" in text or "ASSWORD" in text:
        text = _KV_PASSWORD.sub(rf"\g<head>{REDACTED}", text)
    return text


def redact_deep(value: Any) -> Any:
    """``value`` (JSON-like: str, dict, list, tuple, scalars) with ``redact``
    applied to every string in it, keys included. A value with nothing to
    redact is returned itself (not a copy); other objects, and containers
    met again (a cycle), are left as they are."""
    return _redact_deep(value, set())


def _redact_deep(value: Any, seen: set[int]) -> Any:
    if isinstance(value, str):
        redacted = redact(value)
        return value if redacted == value else redacted
    if not isinstance(value, dict | list | tuple) or id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, dict):
        pairs = [
            (_redact_deep(k, seen), _redact_deep(v, seen)) for k, v in value.items()
        ]
        if all(
            k is k0 and v is v0
            for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)
        ):
            return value
        return dict(pairs)
    items = [_redact_deep(v, seen) for v in value]
    if all(a is b for a, b in zip(items, value, strict=True)):
        return value
    return type(value)(items)


class RedactingFilter(logging.Filter):
    """Redacts a record in place: its message (arguments merged in) and the
    text of its traceback, before any handler formats it. The exception
    object stays on the record (``exc_info``) for handlers that want it;
    procession's own errors redact their messages when made."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(
                logging.Formatter().formatException(record.exc_info)
            )
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER: Final = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """``get_logger(name)`` with the ``RedactingFilter`` on it (once):
    every module of the package logs through one of these."""
    log = logging.getLogger(name)
    if _FILTER not in log.filters:
        log.addFilter(_FILTER)
    return log
