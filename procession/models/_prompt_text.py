"""``check_prompt_text``: the last look at a prompt's text before it is sent."""

from __future__ import annotations

from collections.abc import Iterable

from ..data import PromptMessage
from ..wire import check_text, find_lone_surrogate

__all__ = ["check_prompt_text"]


def check_prompt_text(prompt: Iterable[PromptMessage]) -> None:
    """Raise ``InvalidTextError`` if a string anywhere in ``prompt`` (text,
    reasoning, tool arguments and results, file data, provider options, keys
    included) holds a lone surrogate, which no provider request can carry;
    return ``None`` when all of it is valid Unicode.

    The error names the prompt message (index and role), the part (index and
    type) and the string's path inside it, the offset and the code point, e.g.
    ``prompt message #2 (user), part #0 (text): text holds a lone surrogate
    U+D800 at offset 5; ...``. Cheap on large prompts: an ASCII string costs
    one ``isascii()``, another one UTF-8 encode; the offender is located only
    on failure. Does not modify ``prompt``.
    """
    for index, message in enumerate(prompt):
        # Names are made only for an offender: a valid prompt formats nothing.
        def named(index: int = index, message: PromptMessage = message) -> str:
            return f"prompt message #{index} ({message.role})"

        if isinstance(message.content, str):  # a system message
            check_text(message.content, named, path="content")
        else:
            for number, part in enumerate(message.content):
                if find_lone_surrogate(part) is not None:
                    check_text(part, f"{named()}, part #{number} ({part.type})")
        check_text(message.provider_options, named, path="provider_options")
