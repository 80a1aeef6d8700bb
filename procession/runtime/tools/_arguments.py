"""``parse_arguments``: checking the model's arguments for a tool.

The checks themselves (a strict cattrs converter for attrs inputs, JSON Schema
validation for dict inputs: the ``jsonschema`` package when it is installed,
else a small built-in validator) are ``procession.wire.ValueSchema``, shared
with the structured-output processor; this module decodes the arguments and
turns a mismatch into a ``ToolArgumentsError``.

Argument checking is strict, as JSON Schema is: ``"5"`` is not an integer and
``1`` is not a boolean. The one leniency, also JSON Schema's, is that an integral
float (``5.0``) is accepted as an integer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..._errors import ToolArgumentsError
from ...wire import ValueMismatch, short_repr

if TYPE_CHECKING:
    from ._tool import Tool

__all__ = ["parse_arguments"]

_short = short_repr


# --------------------------------------------------------------------------- #
# Parsing
# --------------------------------------------------------------------------- #


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _decode(tool_name: str, raw: object) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw, parse_constant=_reject_constant)
        except ValueError as error:  # JSONDecodeError is a ValueError
            raise ToolArgumentsError(
                tool_name, f"not valid JSON ({error}): {_short(raw)}"
            ) from None
    if not isinstance(raw, Mapping):
        raise ToolArgumentsError(
            tool_name, f"expected a JSON object, got {_short(raw)}"
        )
    # A copy: the arguments arrived in a chunk, an immutable value that earlier
    # stages may still hold, and the tool may edit what it receives.
    return copy.deepcopy(dict(raw))


def parse_arguments(tool: Tool, raw: Mapping[str, Any] | str | None) -> Any:
    """Check the model's arguments for ``tool`` and return what ``execute`` gets.

    ``raw`` is a dict, its JSON text, or None; None and an empty string mean
    ``{}`` (providers send either for a call without arguments). Returns an
    instance of the tool's attrs input, else a ``dict`` (a copy of ``raw``).
    Pure: no I/O, no checkpoint.

    Raises:
        ToolArgumentsError: the arguments are not JSON, not an object, or fail
            the input; the message lists every problem with its path, e.g.
            ``expected an integer, got '5' @ $.count`` (up to ten).
    """
    data = _decode(tool.name, raw)
    checker = tool._checker  # noqa: SLF001 - the schema the Tool compiled for this
    if checker is None:
        return data
    try:
        return checker.check(data)
    except ValueMismatch as mismatch:
        # The cattrs (or attrs) error stays the cause, as it was before the
        # checks moved down to procession.wire.
        cause = mismatch.__cause__
        if cause is not None:
            raise ToolArgumentsError(tool.name, str(mismatch)) from cause
        raise ToolArgumentsError(tool.name, str(mismatch)) from None
