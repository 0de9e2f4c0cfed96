"""The target model and its KV cache, by job: the fused Qwen3 forward (fused.py), one request's target
(request.py: prefill, verify, keep), a batch's targets (batch.py) and the verifies replayed as CUDA graphs
(graphs.py). The verify's speed profiles sit beside the scheduler that reads them (engine/speed.py)."""

from .batch import BatchTarget, RaggedBatchTarget, batch_target_for, ragged_forward
from .fused import FUSED_ATTENTION_DEVICES, FusedQwen3, RowSlots, attend, folded_mask, rotate_half
from .graphs import CUDA_GRAPHS, GRAPHED_CONTEXT, GRAPHS_CHECKED_ON, GraphedVerifies, graphs_wanted
from .request import TREE_ROOM, VERIFY_WIDTH, Target, TransformersTarget, fused_forward, target_for

__all__ = ["BatchTarget", "CUDA_GRAPHS", "FUSED_ATTENTION_DEVICES", "GRAPHED_CONTEXT", "GRAPHS_CHECKED_ON",
           "GraphedVerifies", "FusedQwen3", "RaggedBatchTarget", "RowSlots", "TREE_ROOM", "Target",
           "TransformersTarget", "VERIFY_WIDTH", "attend", "batch_target_for", "folded_mask", "fused_forward",
           "graphs_wanted", "ragged_forward", "rotate_half", "target_for"]
