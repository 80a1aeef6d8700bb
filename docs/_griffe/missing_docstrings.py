"""A Griffe extension for the API pages: every class and function a public
module of procession exports must have a docstring.

``mkdocs.yml`` loads it into mkdocstrings; a missing docstring is a warning,
which ``mkdocs build --strict`` (run by ``.ci/run``) turns into a failure.
Public means: a module path with no ``_``-prefixed part, and a member that
module exports (its ``__all__``, else a name without a leading ``_``).
Constants and type aliases are not checked; methods are described by their
class's docstring where they have none of their own.
"""

from __future__ import annotations

from typing import Any

import griffe

logger = griffe.get_logger(__name__)


def _public_modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for name, submodule in module.modules.items():
        if not name.startswith("_"):
            found.extend(_public_modules(submodule))
    return found


class MissingDocstrings(griffe.Extension):
    def on_package(
        self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any
    ) -> None:
        if pkg.path != "procession":
            return
        for module in _public_modules(pkg):
            for name, member in module.members.items():
                try:
                    if name.startswith("_") or not member.is_public:
                        continue
                    target = member.final_target if member.is_alias else member
                except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                    continue  # defined outside procession
                if (target.is_class or target.is_function) and not target.docstring:
                    logger.warning(
                        f"{module.path}.{name} ({target.path}) has no docstring"
                    )
