"""One request's fixed-width verifies replayed as CUDA graphs, and where they are wanted."""

from __future__ import annotations

import torch

from ..contract.types import EngineError
from .fused import FusedQwen3
from .request import VERIFY_WIDTH


GRAPHED_CONTEXT = 4096  # positions of the one cache CUDA graphs are captured over; longer runs verify eagerly
CUDA_GRAPHS = ("auto", "on", "off")
# Device names on which the device check (scripts/gpu_check.py, section "steps") found graphed verifies writing the
# eager ones' tokens: `--cuda-graphs auto` turns graphs on there only
GRAPHS_CHECKED_ON: tuple[str, ...] = ()


def graphs_wanted(choice: str, device: torch.device) -> bool:
    """Whether verifies are replayed as CUDA graphs: "on" on any CUDA device, "off" never, "auto" on the devices
    GRAPHS_CHECKED_ON names. Raises ValueError for any other choice."""
    if choice not in CUDA_GRAPHS:
        raise EngineError(f"cuda graphs must be one of {', '.join(CUDA_GRAPHS)}, got {choice!r}")
    if device.type != "cuda" or choice == "off":
        return False
    return choice == "on" or torch.cuda.get_device_name(device) in GRAPHS_CHECKED_ON


class GraphedVerifies:
    """A target's fixed-width verifies captured as CUDA graphs, one per set of feature layers, over one cache of
    `capacity` positions that every run of the engine shares (a graph reads and writes the memory it was captured
    with). `prepare` captures before a run starts, on the thread that starts it: never on the overlap's device
    thread, whose neighbour (the tracer) may sync the device while a capture is open. Capture errors are the
    capturing thread's own (`capture_error_mode="thread_local"`), so another thread's work cannot fail it. Inputs
    are copied into the graph's own buffers; outputs are copied out of its, since the next replay writes them
    again."""

    def __init__(self, fused: FusedQwen3, capacity: int, width: int = VERIFY_WIDTH):
        self.fused = fused
        self.width = width
        self.keys, self.values = fused.new_cache(capacity)
        self.graphs: dict[tuple | None, tuple] = {}

    def prepare(self, layer_ids: list[int] | None) -> None:
        """Capture the verify that reads `layer_ids`' features, unless it is captured already."""
        key = tuple(layer_ids) if layer_ids is not None else None
        if key not in self.graphs:
            self.graphs[key] = self._capture(layer_ids)

    def replay(self, layer_ids: list[int] | None, ids, positions, slots, mask):
        self.prepare(layer_ids)  # captured by Engine before the run; here only for a caller that did not
        graph, inputs, outputs = self.graphs[tuple(layer_ids) if layer_ids is not None else None]
        for buffer, value in zip(inputs, (ids, positions, slots, mask)):
            buffer.copy_(value)
        graph.replay()
        logits, features = outputs
        return logits.clone(), features.clone() if features is not None else None

    def _capture(self, layer_ids: list[int] | None) -> tuple:
        device, width = self.keys.device, self.width
        capacity = self.keys.shape[3]
        # warm-up writes land in the last slots, which no run uses (Engine.new_target leaves the width free)
        slots = torch.arange(capacity - width, capacity, device=device)
        inputs = (torch.zeros(1, width, dtype=torch.long, device=device), slots[None].clone(), slots,
                  torch.ones(1, 1, width, capacity, dtype=torch.bool, device=device))

        def run():
            return self.fused.forward(inputs[0], inputs[1], self.keys, self.values, inputs[2], inputs[3], False,
                                      layer_ids)

        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # kernels chosen and memory allocated before capture, as capture requires
            for _ in range(2):
                run()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = run()
        torch.cuda.synchronize(device)
        return graph, inputs, outputs
