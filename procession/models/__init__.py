"""The language-model interface and the model-id registry.

``LanguageModel`` (the protocol every provider and ``ScriptedModel`` implement),
``ModelRequest`` / ``ModelFinish``, the registry that resolves
``"provider/model-id"`` strings, and ``check_prompt_text`` (a prompt's text is
valid Unicode; checked before each model call). It sits below
``procession.processors`` so a built-in processor may call a model. The
concrete providers live in ``procession.providers`` and register their
prefixes when imported; the registry imports them lazily, by prefix, the first
time one is asked for.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._model import FinishReason as FinishReason
from ._model import LanguageModel as LanguageModel
from ._model import ModelFinish as ModelFinish
from ._model import ModelRequest as ModelRequest
from ._model import ModelResponse as ModelResponse
from ._model import ToolChoice as ToolChoice
from ._model import ToolDefinition as ToolDefinition
from ._prompt_text import check_prompt_text as check_prompt_text
from ._registry import register_provider as register_provider
from ._registry import registered_providers as registered_providers
from ._registry import resolve_model as resolve_model
from ._registry import unregister_provider as unregister_provider

__all__ = [
    "FinishReason",
    "LanguageModel",
    "ModelFinish",
    "ModelRequest",
    "ModelResponse",
    "ToolChoice",
    "ToolDefinition",
    "check_prompt_text",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "unregister_provider",
]

_fixup_module_metadata(__name__, globals())
