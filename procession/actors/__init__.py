"""The actor kernel: processor actors, the output-stream pipeline, and the
run's coordination protocol (``RunControl``)."""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._actor import ProcessorActor as ProcessorActor
from ._control import RetryRequested as RetryRequested
from ._control import RunControl as RunControl
from ._control import RunObserver as RunObserver
from ._interface import ExecutionMode as ExecutionMode
from ._interface import InlineSource as InlineSource
from ._interface import PipelineDriver as PipelineDriver
from ._interface import PipelineOutcome as PipelineOutcome
from ._interface import PipelineStatistics as PipelineStatistics
from ._open import open_output_pipeline as open_output_pipeline
from ._pipeline import GRACE_SECONDS as GRACE_SECONDS
from ._pipeline import OutputPipeline as OutputPipeline
from ._supervision import unwrapping_a_lone_exception as unwrapping_a_lone_exception

__all__ = [
    "ExecutionMode",
    "GRACE_SECONDS",
    "InlineSource",
    "OutputPipeline",
    "PipelineDriver",
    "PipelineOutcome",
    "PipelineStatistics",
    "ProcessorActor",
    "RetryRequested",
    "RunControl",
    "RunObserver",
    "open_output_pipeline",
    "unwrapping_a_lone_exception",
]

_fixup_module_metadata(__name__, globals())
