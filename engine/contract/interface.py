"""The engine as the app uses it: everything a page, a Space or a script may call, and nothing else.

Two classes implement it: engine.loop.Engine (the models in this process) and engine.process.EngineProcess (the
same models in a process of their own, answering over a pipe). The app is written against this Protocol, so it
never needs to know which one it holds, and it never imports torch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

from .types import EngineError, GenerationConfig, Request, RunResult, Step, checked_requests


@runtime_checkable
class EngineLike(Protocol):
    preset: str  # the preset's name ("tiny", "qwen3-4b", or "custom" for models passed in)

    @property
    def device_name(self) -> str:
        """The device the models run on, in words ("cpu (1 thread)", "NVIDIA H200")."""

    def methods(self) -> list[str]:
        """The methods it can run, in the registry's order: the baseline and every method with a drafter."""

    def drafter_label(self, method: str, temperature: float = 0.0) -> str:
        """Which drafter serves `method` at `temperature`, in words (the lane header)."""

    def max_drafts(self, method: str) -> int | None:
        """The most tokens `method` can draft per step here (a block drafter's trained block); None: no limit."""

    def encode_prompt(self, prompt: str) -> list[int]:
        """The prompt's token ids; EngineError (one line) for an empty, too long or over-context prompt."""

    def requests(self, prompt: str, configs: Sequence[GenerationConfig]) -> list[Request]:
        """One checked request per config over the prompt, encoded once (types.py checked_requests): each config
        validated, its drafts per step cut to its drafter's trained block; EngineError names the first problem."""

    def stream(self, request: Request | str, config: GenerationConfig | None = None) -> Iterator[Step]:
        """One run of a checked request, each step (the prefill first) as soon as it is done; nothing is checked
        again. A prompt and its config are first made into a request (types.py as_request): the one path."""

    def generate(self, request: Request | str, config: GenerationConfig | None = None,
                 stop: threading.Event | None = None) -> RunResult:
        """The same run to its end, the whole trace and summary; Stopped once `stop` is set."""

    def target_entropy(self, prompt_ids: list[int], output_ids: list[int], temperature: float) -> list[float]:
        """The target's entropy (nats) before each output token at `temperature`."""

    def warm_up(self) -> None:
        """Run every method briefly once, so first-call costs stay out of measured runs."""


class KnownFacts:
    """The facts an engine whose models run elsewhere (engine.process.EngineProcess, a ZeroGPU Space's engine)
    answers without them: its methods, each method's drafter in words, its longest draft, as the models' process
    said them once (`_methods`, `_labels` keyed by (method, above temperature 0), `_caps`), and so its requests."""

    preset: str
    _methods: list[str]
    _labels: dict[tuple[str, bool], str]
    _caps: dict[str, int | None]

    def methods(self) -> list[str]:
        return list(self._methods)

    def drafter_label(self, method: str, temperature: float = 0.0) -> str:
        return self._labels[(method, temperature > 0)]

    def max_drafts(self, method: str) -> int | None:
        if method not in self._caps:
            raise EngineError(f"preset {self.preset!r} has no drafter for method {method!r}")
        return self._caps[method]

    def requests(self, prompt: str, configs: Sequence[GenerationConfig]) -> list[Request]:
        """Checked here, by the facts and the tokenizer (`encode_prompt`): no model runs for them."""
        return checked_requests(self, prompt, configs)
