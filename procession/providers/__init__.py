"""Model providers: Anthropic (official SDK) and OpenAI (Chat Completions and
Responses over ``httpx2``).

Importing this package registers the model ids

* ``"anthropic/<model>"`` → ``AnthropicModel`` (extra ``anthropic``),
* ``"openai/<model>"`` → ``OpenAIResponsesModel`` (extra ``openai``),
* ``"openai-chat/<model>"`` → ``OpenAIChatModel`` (extra ``openai``),

with ``procession.models.register_provider``. The SDKs are imported only when a
model is built: a missing package, or a missing API key, is a
``ConfigurationError`` raised then, before any request.

Every provider raises ``ProviderError`` (never an SDK exception), always one of
its kinds (``ProviderStatusError`` and its ``RateLimitError`` /
``OverloadedError``, ``ProviderTimeoutError``, ``ProviderConnectionError``,
``ProviderStreamError``), and closes its HTTP response when the
``async with model.stream(...)`` block is left.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ..models import register_provider as _register
from ._anthropic import AnthropicModel as AnthropicModel
from ._openai_chat import OpenAIChatModel as OpenAIChatModel
from ._openai_responses import OpenAIResponsesModel as OpenAIResponsesModel

__all__ = [
    "AnthropicModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
]

_register("anthropic", AnthropicModel)
_register("openai", OpenAIResponsesModel)
_register("openai-chat", OpenAIChatModel)

_fixup_module_metadata(__name__, globals())
