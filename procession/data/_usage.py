"""Token usage: one value for a model call, a step or a whole run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Usage", "add_usage"]


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage (AI SDK ``LanguageModelUsage``). Counts are ``None`` when the
    provider did not report them."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    raw: Any = None
    """The provider's own usage object, unchanged."""
    extra: Mapping[str, Any] = attrs.field(factory=dict)


def add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    """``total`` plus ``more``, field by field; a count stays ``None`` only when
    neither side reported it. ``None`` for either argument means "nothing yet"."""
    if more is None:
        return total
    if total is None:
        return more

    def plus(a: int | None, b: int | None) -> int | None:
        return None if a is None and b is None else (a or 0) + (b or 0)

    return Usage(
        input_tokens=plus(total.input_tokens, more.input_tokens),
        output_tokens=plus(total.output_tokens, more.output_tokens),
        total_tokens=plus(total.total_tokens, more.total_tokens),
        reasoning_tokens=plus(total.reasoning_tokens, more.reasoning_tokens),
        cached_input_tokens=plus(total.cached_input_tokens, more.cached_input_tokens),
        cache_creation_input_tokens=plus(
            total.cache_creation_input_tokens, more.cache_creation_input_tokens
        ),
    )
