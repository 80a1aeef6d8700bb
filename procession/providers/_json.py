"""Reading provider JSON (``Any`` from ``json.loads``) into precise types."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "as_dict",
    "dumps",
    "get_dict",
    "get_int",
    "get_str",
    "loads",
    "parse_args",
]

loads = json.loads
"""Parse JSON text (a server-sent event's ``data``)."""


def as_dict(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def get_dict(value: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``value[key]`` if it is a JSON object, else an empty dict."""
    return as_dict(value.get(key))


def get_str(value: Mapping[str, Any], key: str) -> str | None:
    """``value[key]`` if it is a string, else ``None``."""
    item = value.get(key)
    return item if isinstance(item, str) else None


def get_int(value: Mapping[str, Any], key: str) -> int | None:
    """``value[key]`` if it is an integer (not a bool), else ``None``."""
    item = value.get(key)
    return item if isinstance(item, int) and not isinstance(item, bool) else None


def parse_args(text: str) -> Any:
    """Tool-call arguments streamed as JSON text: the parsed value (``{}`` for
    empty text), or the text itself when it is not valid JSON (the agent then
    reports the bad arguments to the model as a tool error)."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def dumps(value: object) -> str:
    """Compact JSON text of ``value`` (non-JSON values by their ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
