"""The redaction helpers every error, repr, frame, log line and span goes
through (``procession._secrets``)."""

from __future__ import annotations

import logging
import secrets

import pytest

from procession import ProviderError
from procession._secrets import (
    REDACTED,
    get_logger,
    redact,
    redact_deep,
    redact_url,
    register_secret,
)


def _fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://user:pw@host:6379/0", "redis://user:[redacted]@host:6379/0"),
        ("redis://:pw@host/0", "redis://:[redacted]@host/0"),
        ("rediss://u:p%40ss@h:1", "rediss://u:[redacted]@h:1"),
        ("postgresql://a:b@h/db?x=1", "postgresql://a:[redacted]@h/db?x=1"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("unix:///tmp/redis.sock", "unix:///tmp/redis.sock"),
    ],
)
def test_redact_url_hides_the_password_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_url_password_is_redacted_wherever_it_is_quoted_later() -> None:
    password = _fresh("pass")
    redact_url(f"redis://u:{password}@h:1/0")
    assert redact(f"AUTH failed for {password}") == f"AUTH failed for {REDACTED}"


def test_redact_covers_registered_secrets_urls_and_libpq_passwords() -> None:
    key = _fresh("sk-ant")
    register_secret(key)
    text = (
        f"key {key} in x-api-key={key}; dsn host=h password=hunter2 user=u; "
        f"quoted password='a b c'; url mysql://root:toor@db/x"
    )
    out = redact(text)
    assert key not in out
    assert "hunter2" not in out
    assert "a b c" not in out
    assert "toor" not in out
    assert out.count(REDACTED) == 5
    assert "user=u" in out
    assert "mysql://root:" in out


def test_short_or_non_string_secrets_are_not_registered() -> None:
    register_secret("short")
    register_secret(None)
    register_secret(12345678)
    assert redact("a short word") == "a short word"


def test_a_longer_secret_containing_a_shorter_one_is_replaced_whole() -> None:
    inner = _fresh("inner")
    outer = f"{inner}-and-more"
    register_secret(inner)
    register_secret(outer)
    assert redact(f"[{outer}]") == f"[{REDACTED}]"


def test_redact_deep_walks_json_values() -> None:
    key = _fresh("deep")
    register_secret(key)
    body = {"error": {"message": f"bad {key}", "list": [key, 1, None]}, key: True}
    assert redact_deep(body) == {
        "error": {"message": f"bad {REDACTED}", "list": [REDACTED, 1, None]},
        REDACTED: True,
    }


def test_provider_errors_redact_their_message_and_body() -> None:
    key = _fresh("sk-live")
    register_secret(key)
    error = ProviderError(f"invalid key {key}", body={"message": key}, status_code=401)
    assert key not in str(error)
    assert key not in repr(error)
    assert error.body == {"message": REDACTED}


def test_the_package_loggers_redact_messages_args_and_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = _fresh("log-secret")
    register_secret(key)
    log = get_logger("procession.test-secrets")
    assert get_logger("procession.test-secrets").filters == log.filters  # once
    with caplog.at_level(logging.DEBUG, logger="procession.test-secrets"):
        log.info("the key is %s", key)
        try:
            raise RuntimeError(f"failed with {key}")
        except RuntimeError:
            log.exception("it failed")
    assert key not in caplog.text
    assert caplog.text.count(REDACTED) == 2
    assert caplog.records[1].exc_info is not None  # the traceback is kept
