"""The attribute, span, event and metric names procession emits, in one place.

The OpenTelemetry GenAI semantic conventions moved to their own repository and
are still "development": their names are written here as plain constants
(never imported from the deprecated ``opentelemetry-semantic-conventions``
package), so a rename is a one-line change. Names under ``procession.`` are
ours: the conventions have nothing for processors, tripwires or retries.
"""

from __future__ import annotations

from typing import Final

# --- GenAI conventions (gen_ai.*) -------------------------------------------------

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = (
    "gen_ai.usage.cache_creation.input_tokens"
)
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' opt-in for message content on spans (``true``)."""

# --- procession's own (procession.*) ------------------------------------------------

RUN_ID: Final = "procession.run.id"
OUTCOME: Final = "procession.outcome"
FINISH_REASON: Final = "procession.finish_reason"
RETRY_COUNT: Final = "procession.retry_count"
STEP: Final = "procession.step"
PROCESSOR_ID: Final = "procession.processor.id"
PROCESSOR_INDEX: Final = "procession.processor.index"
HOOK: Final = "procession.hook"
ON_ERROR: Final = "procession.on_error"
ON_ERROR_OUTCOME: Final = "procession.on_error.outcome"
MESSAGES_BEFORE: Final = "procession.messages.before"
MESSAGES_AFTER: Final = "procession.messages.after"
CHUNKS_IN: Final = "procession.chunks.in"
CHUNKS_DELIVERED: Final = "procession.chunks.delivered"
CHUNKS_DROPPED: Final = "procession.chunks.dropped"
CHUNKS_EMITTED: Final = "procession.chunks.emitted"
HOOK_SECONDS: Final = "procession.hook.seconds"
FROM_CACHE: Final = "procession.from_cache"

EVENT_TRIPWIRE: Final = "procession.tripwire"
EVENT_RETRY: Final = "procession.retry"
EVENT_PROVIDER_ERROR: Final = "procession.provider_error"
EVENT_VIOLATION: Final = "procession.violation"

TRIPWIRE_REASON: Final = "procession.tripwire.reason"
TRIPWIRE_RETRY: Final = "procession.tripwire.retry"
TRIPWIRE_METADATA: Final = "procession.tripwire.metadata"
RETRY_CAUSE: Final = "procession.retry.cause"
RETRY_BUDGET_LEFT: Final = "procession.retry.budget_left"
HTTP_STATUS: Final = "http.response.status_code"
RETRYABLE: Final = "procession.error.retryable"

# --- metrics ------------------------------------------------------------------------

METRIC_RUNS: Final = "procession.runs"
METRIC_TRIPWIRES: Final = "procession.tripwires"
METRIC_RETRIES: Final = "procession.retries"
METRIC_CHUNKS: Final = "procession.chunks"
METRIC_TIME_TO_FIRST_CHUNK: Final = "procession.time_to_first_chunk"
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"

DURATION_BUCKETS: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)
"""Seconds: first chunks in milliseconds, whole model calls in minutes."""
TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
)
"""The GenAI conventions' advice for token counts (powers of four)."""
