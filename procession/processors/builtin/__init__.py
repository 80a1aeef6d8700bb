"""The built-ins' room. The built-in processors themselves live in
``procession.processors`` (their one home; the old path here warns); this
module's face is their configuration types and helpers.

* ``StreamErrorRetryProcessor``: retries a model call that failed with a
  transient API or stream error (the seed's StreamErrorRetryProcessor).
* ``PrefillErrorHandler``: recovers from Anthropic's "assistant message
  prefill" rejection by appending a continue reminder.
* ``RegexFilter`` / ``PIIDetector``: deterministic pattern guards (presets for
  personal data and secrets) on input, the output stream and tool results.
* ``ModerationProcessor``, ``PromptInjectionDetector``, ``LanguageDetector``:
  LLM-judged guards (a model gives a JSON verdict) on input and on windows of
  the output stream, never per chunk.
* ``StructuredOutput``: the final answer parsed as JSON, checked against an
  attrs class or a JSON Schema, retried with the problems as feedback; the
  value is ``result.object``.
* ``HoldBackWindow``: the helper a stream processor uses to see matches that
  span chunk boundaries, holding back only the tail that could still match.
"""

from ..._faces import moved_names as _moved_names
from ._judge import Judge as Judge
from ._judge import parse_verdict as parse_verdict
from ._judged import Finding as Finding
from ._judged import JudgedOutput as JudgedOutput
from ._judged import OnJudgeError as OnJudgeError
from ._moderation import INJECTION_TYPES as INJECTION_TYPES
from ._moderation import MODERATION_CATEGORIES as MODERATION_CATEGORIES
from ._moderation import LanguageStrategy as LanguageStrategy
from ._moderation import ModerationStrategy as ModerationStrategy
from ._moderation import PromptInjectionStrategy as PromptInjectionStrategy
from ._patterns import PII_TYPES as PII_TYPES
from ._patterns import PRESET_RULES as PRESET_RULES
from ._patterns import Detection as Detection
from ._patterns import PatternMatcher as PatternMatcher
from ._patterns import iban_is_valid as iban_is_valid
from ._patterns import luhn_is_valid as luhn_is_valid
from ._pii import RedactionMethod as RedactionMethod
from ._pii import RegexPreset as RegexPreset
from ._pii import Strategy as Strategy
from ._prefill import PREFILL_ERROR_PATTERNS as PREFILL_ERROR_PATTERNS
from ._prefill import PREFILL_REMINDER_TEXT as PREFILL_REMINDER_TEXT
from ._prefill import PREFILL_REMINDER_TYPE as PREFILL_REMINDER_TYPE
from ._prefill import PREFILL_SIGNAL as PREFILL_SIGNAL
from ._prefill import is_prefill_error as is_prefill_error
from ._stream_error_retry import (
    DEFAULT_MAX_RETRY_AFTER_MS as DEFAULT_MAX_RETRY_AFTER_MS,
)
from ._stream_error_retry import (
    RETRYABLE_OPENAI_ERROR_CODES as RETRYABLE_OPENAI_ERROR_CODES,
)
from ._stream_error_retry import TERMINAL_AUTH_ERROR_CODES as TERMINAL_AUTH_ERROR_CODES
from ._stream_error_retry import DelayMs as DelayMs
from ._stream_error_retry import ErrorMatcher as ErrorMatcher
from ._stream_error_retry import OnRetry as OnRetry
from ._structured import (
    StructuredOutputErrorStrategy as StructuredOutputErrorStrategy,
)
from ._structured import read_json as read_json
from ._tokens import TokenCounter as TokenCounter
from ._tokens import estimate_tokens as estimate_tokens
from ._window import Scanner as Scanner

__all__ = [
    "DEFAULT_MAX_RETRY_AFTER_MS",
    "DelayMs",
    "Detection",
    "ErrorMatcher",
    "Finding",
    "INJECTION_TYPES",
    "Judge",
    "JudgedOutput",
    "LanguageStrategy",
    "MODERATION_CATEGORIES",
    "ModerationStrategy",
    "OnJudgeError",
    "OnRetry",
    "PII_TYPES",
    "PREFILL_ERROR_PATTERNS",
    "PREFILL_REMINDER_TEXT",
    "PREFILL_REMINDER_TYPE",
    "PREFILL_SIGNAL",
    "PRESET_RULES",
    "PatternMatcher",
    "PromptInjectionStrategy",
    "RETRYABLE_OPENAI_ERROR_CODES",
    "RedactionMethod",
    "RegexPreset",
    "Scanner",
    "Strategy",
    "StructuredOutputErrorStrategy",
    "TERMINAL_AUTH_ERROR_CODES",
    "TokenCounter",
    "estimate_tokens",
    "iban_is_valid",
    "is_prefill_error",
    "luhn_is_valid",
    "parse_verdict",
    "read_json",
]

__getattr__, __dir__ = _moved_names(
    __name__,
    {
        "BatchParts": "procession.processors",
        "HoldBackWindow": "procession.processors",
        "JudgeError": "procession.processors",
        "LanguageDetector": "procession.processors",
        "ModerationProcessor": "procession.processors",
        "PatternRule": "procession.processors",
        "PIIDetector": "procession.processors",
        "PrefillErrorHandler": "procession.processors",
        "PromptInjectionDetector": "procession.processors",
        "RegexFilter": "procession.processors",
        "RetryMatcher": "procession.processors",
        "StreamErrorRetryProcessor": "procession.processors",
        "StructuredOutput": "procession.processors",
        "SystemPromptScrubber": "procession.processors",
        "TokenLimiter": "procession.processors",
        "ToolCallFilter": "procession.processors",
        "UnicodeNormalizer": "procession.processors",
        "get_retry_after_ms": "procession.processors",
        "is_bad_request_error": "procession.processors",
        "is_retryable_openai_responses_stream_error": "procession.processors",
        "is_terminal_auth_error": "procession.processors",
    },
)
