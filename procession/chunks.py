"""Stream chunks and their Mastra wire JSON: the public home of the chunk types.

``to_wire(chunk) -> dict`` and ``from_wire(dict) -> chunk`` speak the JSON that
Mastra / AI SDK clients read (``procession.wire`` has the exact rules). Chunks
are frozen attrs classes, one per Mastra chunk type; ``Chunk`` is their union.
"""

from ._faces import fixup_module_metadata as _fixup_module_metadata
from .data import CHUNK_CLASSES as CHUNK_CLASSES
from .data import CHUNK_TYPES as CHUNK_TYPES
from .data import AbortChunk as AbortChunk
from .data import AbortPayload as AbortPayload
from .data import Chunk as Chunk
from .data import ChunkFrom as ChunkFrom
from .data import DataChunk as DataChunk
from .data import ErrorChunk as ErrorChunk
from .data import ErrorPayload as ErrorPayload
from .data import FileChunk as FileChunk
from .data import FilePayload as FilePayload
from .data import FinishChunk as FinishChunk
from .data import FinishPayload as FinishPayload
from .data import ObjectChunk as ObjectChunk
from .data import ObjectResultChunk as ObjectResultChunk
from .data import RawChunk as RawChunk
from .data import RawPayload as RawPayload
from .data import ReasoningDeltaChunk as ReasoningDeltaChunk
from .data import ReasoningDeltaPayload as ReasoningDeltaPayload
from .data import ReasoningEndChunk as ReasoningEndChunk
from .data import ReasoningEndPayload as ReasoningEndPayload
from .data import ReasoningSignatureChunk as ReasoningSignatureChunk
from .data import ReasoningSignaturePayload as ReasoningSignaturePayload
from .data import ReasoningStartChunk as ReasoningStartChunk
from .data import ReasoningStartPayload as ReasoningStartPayload
from .data import RedactedReasoningChunk as RedactedReasoningChunk
from .data import RedactedReasoningPayload as RedactedReasoningPayload
from .data import ResponseMetadataChunk as ResponseMetadataChunk
from .data import ResponseMetadataPayload as ResponseMetadataPayload
from .data import SourceChunk as SourceChunk
from .data import SourcePayload as SourcePayload
from .data import StartChunk as StartChunk
from .data import StartPayload as StartPayload
from .data import StepFinishChunk as StepFinishChunk
from .data import StepFinishPayload as StepFinishPayload
from .data import StepOutput as StepOutput
from .data import StepResultInfo as StepResultInfo
from .data import StepRetryChunk as StepRetryChunk
from .data import StepRetryPayload as StepRetryPayload
from .data import StepStartChunk as StepStartChunk
from .data import StepStartPayload as StepStartPayload
from .data import TextDeltaChunk as TextDeltaChunk
from .data import TextDeltaPayload as TextDeltaPayload
from .data import TextEndChunk as TextEndChunk
from .data import TextEndPayload as TextEndPayload
from .data import TextStartChunk as TextStartChunk
from .data import TextStartPayload as TextStartPayload
from .data import ToolApproval as ToolApproval
from .data import ToolCallApprovalChunk as ToolCallApprovalChunk
from .data import ToolCallApprovalPayload as ToolCallApprovalPayload
from .data import ToolCallChunk as ToolCallChunk
from .data import ToolCallDeltaChunk as ToolCallDeltaChunk
from .data import ToolCallDeltaPayload as ToolCallDeltaPayload
from .data import ToolCallInputStreamingEndChunk as ToolCallInputStreamingEndChunk
from .data import ToolCallInputStreamingEndPayload as ToolCallInputStreamingEndPayload
from .data import ToolCallInputStreamingStartChunk as ToolCallInputStreamingStartChunk
from .data import (
    ToolCallInputStreamingStartPayload as ToolCallInputStreamingStartPayload,
)
from .data import ToolCallPayload as ToolCallPayload
from .data import ToolCallSuspendedChunk as ToolCallSuspendedChunk
from .data import ToolCallSuspendedPayload as ToolCallSuspendedPayload
from .data import ToolErrorChunk as ToolErrorChunk
from .data import ToolErrorPayload as ToolErrorPayload
from .data import ToolOutputChunk as ToolOutputChunk
from .data import ToolOutputDeniedChunk as ToolOutputDeniedChunk
from .data import ToolOutputDeniedPayload as ToolOutputDeniedPayload
from .data import ToolOutputPayload as ToolOutputPayload
from .data import ToolResultChunk as ToolResultChunk
from .data import ToolResultPayload as ToolResultPayload
from .data import TripwireChunk as TripwireChunk
from .data import TripwirePayload as TripwirePayload
from .data import Usage as Usage
from .data import abort as abort
from .data import data as data
from .data import error as error
from .data import finish as finish
from .data import is_data_chunk as is_data_chunk
from .data import reasoning_delta as reasoning_delta
from .data import step_finish as step_finish
from .data import step_start as step_start
from .data import text_delta as text_delta
from .data import text_end as text_end
from .data import text_start as text_start
from .data import tool_call as tool_call
from .data import tool_result as tool_result
from .data import tripwire as tripwire
from .wire import from_wire as from_wire
from .wire import to_wire as to_wire

__all__ = [
    "AbortChunk",
    "AbortPayload",
    "CHUNK_CLASSES",
    "CHUNK_TYPES",
    "Chunk",
    "ChunkFrom",
    "DataChunk",
    "ErrorChunk",
    "ErrorPayload",
    "FileChunk",
    "FilePayload",
    "FinishChunk",
    "FinishPayload",
    "ObjectChunk",
    "ObjectResultChunk",
    "RawChunk",
    "RawPayload",
    "ReasoningDeltaChunk",
    "ReasoningDeltaPayload",
    "ReasoningEndChunk",
    "ReasoningEndPayload",
    "ReasoningSignatureChunk",
    "ReasoningSignaturePayload",
    "ReasoningStartChunk",
    "ReasoningStartPayload",
    "RedactedReasoningChunk",
    "RedactedReasoningPayload",
    "ResponseMetadataChunk",
    "ResponseMetadataPayload",
    "SourceChunk",
    "SourcePayload",
    "StartChunk",
    "StartPayload",
    "StepFinishChunk",
    "StepFinishPayload",
    "StepOutput",
    "StepResultInfo",
    "StepRetryChunk",
    "StepRetryPayload",
    "StepStartChunk",
    "StepStartPayload",
    "TextDeltaChunk",
    "TextDeltaPayload",
    "TextEndChunk",
    "TextEndPayload",
    "TextStartChunk",
    "TextStartPayload",
    "ToolApproval",
    "ToolCallApprovalChunk",
    "ToolCallApprovalPayload",
    "ToolCallChunk",
    "ToolCallDeltaChunk",
    "ToolCallDeltaPayload",
    "ToolCallInputStreamingEndChunk",
    "ToolCallInputStreamingEndPayload",
    "ToolCallInputStreamingStartChunk",
    "ToolCallInputStreamingStartPayload",
    "ToolCallPayload",
    "ToolCallSuspendedChunk",
    "ToolCallSuspendedPayload",
    "ToolErrorChunk",
    "ToolErrorPayload",
    "ToolOutputChunk",
    "ToolOutputDeniedChunk",
    "ToolOutputDeniedPayload",
    "ToolOutputPayload",
    "ToolResultChunk",
    "ToolResultPayload",
    "TripwireChunk",
    "TripwirePayload",
    "Usage",
    "abort",
    "data",
    "error",
    "finish",
    "from_wire",
    "is_data_chunk",
    "reasoning_delta",
    "step_finish",
    "step_start",
    "text_delta",
    "text_end",
    "text_start",
    "to_wire",
    "tool_call",
    "tool_result",
    "tripwire",
]

_fixup_module_metadata(__name__, globals())
