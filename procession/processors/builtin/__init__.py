"""The built-in processors (re-exported from ``procession.processors``).

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

from ._batch import BatchParts as BatchParts
from ._batch import ToolCallFilter as ToolCallFilter
from ._judge import Judge as Judge
from ._judge import JudgeError as JudgeError
from ._judge import parse_verdict as parse_verdict
from ._judged import Finding as Finding
from ._judged import JudgedOutput as JudgedOutput
from ._judged import OnJudgeError as OnJudgeError
from ._moderation import INJECTION_TYPES as INJECTION_TYPES
from ._moderation import MODERATION_CATEGORIES as MODERATION_CATEGORIES
from ._moderation import LanguageDetector as LanguageDetector
from ._moderation import LanguageStrategy as LanguageStrategy
from ._moderation import ModerationProcessor as ModerationProcessor
from ._moderation import ModerationStrategy as ModerationStrategy
from ._moderation import PromptInjectionDetector as PromptInjectionDetector
from ._moderation import PromptInjectionStrategy as PromptInjectionStrategy
from ._patterns import PII_TYPES as PII_TYPES
from ._patterns import PRESET_RULES as PRESET_RULES
from ._patterns import Detection as Detection
from ._patterns import PatternMatcher as PatternMatcher
from ._patterns import PatternRule as PatternRule
from ._patterns import iban_is_valid as iban_is_valid
from ._patterns import luhn_is_valid as luhn_is_valid
from ._pii import PIIDetector as PIIDetector
from ._pii import RedactionMethod as RedactionMethod
from ._pii import RegexFilter as RegexFilter
from ._pii import RegexPreset as RegexPreset
from ._pii import Strategy as Strategy
from ._prefill import PREFILL_ERROR_PATTERNS as PREFILL_ERROR_PATTERNS
from ._prefill import PREFILL_REMINDER_TEXT as PREFILL_REMINDER_TEXT
from ._prefill import PREFILL_REMINDER_TYPE as PREFILL_REMINDER_TYPE
from ._prefill import PREFILL_SIGNAL as PREFILL_SIGNAL
from ._prefill import PrefillErrorHandler as PrefillErrorHandler
from ._prefill import is_prefill_error as is_prefill_error
from ._scrubber import SystemPromptScrubber as SystemPromptScrubber
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
from ._stream_error_retry import RetryMatcher as RetryMatcher
from ._stream_error_retry import StreamErrorRetryProcessor as StreamErrorRetryProcessor
from ._stream_error_retry import get_retry_after_ms as get_retry_after_ms
from ._stream_error_retry import is_bad_request_error as is_bad_request_error
from ._stream_error_retry import (
    is_retryable_openai_responses_stream_error as is_retryable_openai_responses_stream_error,  # noqa: E501 - a re-exported name cannot wrap
)
from ._stream_error_retry import is_terminal_auth_error as is_terminal_auth_error
from ._structured import StructuredOutput as StructuredOutput
from ._structured import (
    StructuredOutputErrorStrategy as StructuredOutputErrorStrategy,
)
from ._structured import read_json as read_json
from ._tokens import TokenCounter as TokenCounter
from ._tokens import TokenLimiter as TokenLimiter
from ._tokens import estimate_tokens as estimate_tokens
from ._unicode import UnicodeNormalizer as UnicodeNormalizer
from ._window import HoldBackWindow as HoldBackWindow
from ._window import Scanner as Scanner

__all__ = [
    "BatchParts",
    "DEFAULT_MAX_RETRY_AFTER_MS",
    "DelayMs",
    "Detection",
    "ErrorMatcher",
    "Finding",
    "HoldBackWindow",
    "INJECTION_TYPES",
    "Judge",
    "JudgeError",
    "JudgedOutput",
    "LanguageDetector",
    "LanguageStrategy",
    "MODERATION_CATEGORIES",
    "ModerationProcessor",
    "ModerationStrategy",
    "OnJudgeError",
    "OnRetry",
    "PIIDetector",
    "PII_TYPES",
    "PREFILL_ERROR_PATTERNS",
    "PREFILL_REMINDER_TEXT",
    "PREFILL_REMINDER_TYPE",
    "PREFILL_SIGNAL",
    "PRESET_RULES",
    "PatternMatcher",
    "PatternRule",
    "PrefillErrorHandler",
    "PromptInjectionDetector",
    "PromptInjectionStrategy",
    "RETRYABLE_OPENAI_ERROR_CODES",
    "RedactionMethod",
    "RegexFilter",
    "RegexPreset",
    "RetryMatcher",
    "Scanner",
    "Strategy",
    "StreamErrorRetryProcessor",
    "StructuredOutput",
    "StructuredOutputErrorStrategy",
    "SystemPromptScrubber",
    "TERMINAL_AUTH_ERROR_CODES",
    "TokenCounter",
    "TokenLimiter",
    "ToolCallFilter",
    "UnicodeNormalizer",
    "estimate_tokens",
    "get_retry_after_ms",
    "iban_is_valid",
    "is_bad_request_error",
    "is_prefill_error",
    "is_retryable_openai_responses_stream_error",
    "is_terminal_auth_error",
    "luhn_is_valid",
    "parse_verdict",
    "read_json",
]
