"""The models of one preset on one device (`Engine`): the weights, the tokenizer, the target's fused forward, its
CUDA graphs and speed profiles, and the drafters built over them. Each run over them is engine/run.py's `Run`.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from dataclasses import replace

import torch

from .contract.methods import method as method_entry, method_names, weightless_kind
from .contract.presets import DEFAULT_PRESET, PRESETS, Preset, ablation_shipped
from .contract.types import (MAX_PROMPT_CHARS, EngineError, GenerationConfig, Request, RunResult, Step,
                             as_request, checked_requests)
from .cpu.attention import use_lean_attention
from .cpu.layout import use_column_major_weights, use_packed_vocab_products
from .drafters.base import Drafter, NoDrafter
from .models import (build_weightless, default_dtype, describe_device, drafter_kind_of, implementation,
                     load_causal_lm, load_drafter, load_tokenizer, pick_device, require_runnable, set_cpu_threads,
                     tree_grower)
from .run import Run
from .scheduler import stored_measurement
from .speed import profile_batch_verify_speed, profile_verify_speed
from .target import GRAPHED_CONTEXT, TREE_ROOM, VERIFY_WIDTH, FusedQwen3, GraphedVerifies, graphs_wanted, target_for
from .text import TokenTexts, repair_text


def load_engine(cls, preset: str = DEFAULT_PRESET, device: str = "auto", cache_dir: str | None = None,
                offline: bool | None = None, threads: int | None = None, cuda_graphs: str = "auto",
                dtype: str | None = None, check_memory: bool = True, fixed_width: bool | None = None) -> "Engine":
    """Load an allowlisted preset into `cls` (Engine.load). Hub checkpoints come from the local cache (`cache_dir`,
    default the hub's own) and are downloaded only when the hub is reachable and not `offline`. On the CPU, torch
    runs `threads` threads (default: the preset's choice); this is set for the whole process. On CUDA a
    preset whose weights would not fit the GPU's free memory is refused, unless `check_memory` is False
    (models.require_runnable). fixed_width: every verify at one width (default: on CUDA only; Engine.__init__)."""
    if preset not in PRESETS:
        raise EngineError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    spec: Preset = PRESETS[preset]
    torch_device = pick_device(device)
    set_cpu_threads(torch_device, threads if threads is not None else spec.cpu_threads)
    hub = require_runnable(spec, device, torch_device, cache_dir, offline, check_memory)
    dtype = getattr(torch, dtype) if dtype is not None else default_dtype(torch_device, spec.cuda_dtype)
    drafters = {m: load_drafter(name, method_entry(m).kinds, torch_device, dtype, **hub)
                for m, name in spec.drafters.items()}
    sampled = {m: drafters[m] if name == spec.drafters[m] else load_drafter(name, method_entry(m).kinds, torch_device,
                                                                            dtype, **hub)
               for m, name in spec.sampled_drafters.items()}  # one folder for both temperatures: one network
    ablations = {m: load_drafter(name, method_entry(m).kinds, torch_device, dtype, **hub)
                 for m, name in spec.ablation_drafters.items() if ablation_shipped(name)}
    target = load_causal_lm(spec.target, torch_device, dtype, **hub)
    return cls(target, load_tokenizer(spec.tokenizer, **hub), drafters, torch_device, preset, chat=spec.chat,
               sampled_drafter_models=sampled, cuda_graphs=cuda_graphs, ablation_drafter_models=ablations,
               fixed_width=fixed_width)


def _lay_out(models) -> None:
    """Each of `models` with the CPU's leaner forwards (engine/cpu/): the same numbers."""
    for model in models:
        use_lean_attention(model)  # transformers LMs: the verify's mask built directly, grouped KV heads as is
        use_column_major_weights(model)  # linear weights laid out for the CPU's matrix product
        use_packed_vocab_products(model)  # LM heads: a packed copy for products of 4 rows or more


class Engine:
    """The models of one preset on one device, and what runs are built from: the target with its fused forward, CUDA
    graphs and verify-speed profiles, the drafters over their networks, and the tokenizer. Each method serves that one
    job, handing a run (engine/run.py) what it runs; `stream` and `generate` start one."""

    def __init__(self, target, tokenizer, drafter_models: dict[str, object], device: torch.device,
                 preset: str = "custom", chat: bool = False, sampled_drafter_models: dict[str, object] | None = None,
                 cuda_graphs: str = "auto", ablation_drafter_models: dict[str, object] | None = None,
                 fixed_width: bool | None = None):
        self.target = target
        self.tokenizer = tokenizer
        # method -> loaded drafter network; a method whose drafter needs no weights gets its own built here
        self.drafter_models = {**{m: build_weightless(kind, device) for m in method_names()
                                  if (kind := weightless_kind(m)) is not None}, **drafter_models}
        # method -> the network drafted with above temperature 0 (trained for sampling), where the preset has one
        self.sampled_drafter_models = sampled_drafter_models or {}
        # method -> its ablation trained without the target's features (GenerationConfig.drafter_weights "no_features")
        self.ablation_drafter_models = ablation_drafter_models or {}
        _lay_out({id(m): m for m in (target, *self.drafter_models.values(), *self.sampled_drafter_models.values(),
                                      *self.ablation_drafter_models.values())}.values())  # each network once
        self.drafter_kinds = {m: drafter_kind_of(model) for m, model in self.drafter_models.items()}
        self.sampled_drafter_kinds = {m: drafter_kind_of(model) for m, model in self.sampled_drafter_models.items()}
        # a tree lane drafts with its chain method's network, where that network is of a kind it can grow a tree from
        for models, kinds in ((self.drafter_models, self.drafter_kinds),
                              (self.sampled_drafter_models, self.sampled_drafter_kinds)):
            for m in method_names():
                source = method_entry(m).grows_from
                if source in models and kinds[source].name in method_entry(m).kinds and m not in models:
                    models[m], kinds[m] = models[source], kinds[source]
        self.device = device
        self.preset = preset
        self.chat = chat  # prompts go through the chat template (thinking off)
        self.texts = TokenTexts(tokenizer)
        self.eos_id = tokenizer.eos_token_id
        self.context_length = target.config.max_position_embeddings
        self._verify_steps_per_s: list[float] | None = None  # measured once, for DSpark's scheduler
        self._batch_verify_cost: tuple[float, float] | None = None  # the same in a batch (engine/batch.py)
        # the target's fused forward (engine/target/fused.py), built on first use (fused_target)
        self._fused_target: FusedQwen3 | None = None
        self._fuses = FusedQwen3.supports(target)
        # On CUDA every verify runs at one fixed width (the same kernels for every row whatever the lane, replayable
        # as a CUDA graph); on the CPU exactly its rows (it costs by them). fixed_width True/False asks for either.
        fixed = device.type == "cuda" if fixed_width is None else fixed_width
        self.verify_width = VERIFY_WIDTH if fixed and self._fuses else None
        self.cuda_graphs = graphs_wanted(cuda_graphs, device) and self.verify_width is not None
        self._graphed: GraphedVerifies | None = None  # captured before the runs that need them, over one shared cache

    @property
    def fused_target(self) -> FusedQwen3 | None:
        """The target's fused forward (engine/target/fused.py), or None where transformers' own computes it. Built on
        first use, never at load: on ZeroGPU the app's process loads the weights and a GPU call's worker runs them, and
        weights joined in the app's process would each go to the GPU twice (`spaces` moves every tensor apart, a
        view and the tensor it views alike); joined in the worker, the model's own become views of them."""
        if self._fused_target is None and self._fuses:
            self._fused_target = FusedQwen3(self.target)
        return self._fused_target

    @fused_target.setter
    def fused_target(self, fused: FusedQwen3 | None) -> None:
        self._fused_target, self._fuses = fused, fused is not None

    load = classmethod(load_engine)  # Engine.load(preset, device, ...): the weights read, the engine built

    def methods(self) -> list[str]:
        """The methods this engine can run: the baseline and every method whose drafter is loaded."""
        return [m for m in method_names() if not method_entry(m).kinds or m in self.drafter_models]

    def drafter_label(self, method: str, temperature: float = 0.0) -> str:
        """Which drafter serves `method` here at `temperature`, in words (the app shows it in the lane header)."""
        if not method_entry(method).kinds:
            return NoDrafter.label
        return self.new_drafter(method, GenerationConfig(method=method, temperature=temperature)).label

    def warm_up(self, prompt: str = "def f(x):\n    return x\n") -> None:
        """Run every method once briefly, so first-call costs (allocations, lazy init) stay out of the
        first measured run."""
        for method in self.methods():  # a DSpark run also profiles the verify speeds its scheduler uses
            self.generate(prompt, GenerationConfig(method=method, max_new_tokens=8))
            if method in self.sampled_drafter_models:  # the weights it drafts with above temperature 0
                self.generate(prompt, GenerationConfig(method=method, max_new_tokens=8, temperature=1.0))

    def verify_steps_per_s(self) -> list[float]:
        """SPS(n), target verify steps per second for n tokens, profiled on this device once."""
        if self._verify_steps_per_s is None:
            longest = max(max((self.new_drafter(m).max_drafts or 0 for m in self.drafter_models), default=0), 8) + 1
            self._verify_steps_per_s = profile_verify_speed(self.new_target(None, 128 + longest),
                                                            self.target.config.vocab_size, longest)
        return self._verify_steps_per_s

    def batch_verify_cost(self) -> tuple[float, float]:
        """(a, b) of t(N) = a + b·N, seconds for a batched verify forward of N tokens on this device, for DSpark's
        scheduler in a batch (scheduler.batch_cut): measured once per machine, device, target and torch release,
        and kept in SPECLAB_CACHE (default ~/.cache/speclab), so later processes read it."""
        if self._batch_verify_cost is None:
            self._batch_verify_cost = stored_measurement(
                "batch_verify_cost", f"{self.preset} · {self.device_name} · {platform.node()} · torch {torch.__version__}"
                f" · {'fused' if self.fused_target is not None else 'transformers'} batch verify",
                lambda: profile_batch_verify_speed(self.target, self.fused_target, self.device))
        return self._batch_verify_cost

    @torch.inference_mode()
    def target_entropy(self, prompt_ids: list[int], output_ids: list[int], temperature: float) -> list[float]:
        """The entropy (nats) of the target's distribution at `temperature` before each token of `output_ids`,
        read in one forward over the prompt and output: how sure of itself the target is where it was decoded
        (0 at temperature 0, where it is its argmax)."""
        if temperature == 0 or not output_ids:
            return [0.0] * len(output_ids)
        ids = torch.tensor([list(prompt_ids) + list(output_ids)], device=self.device)
        logits = self.target(ids).logits[0, len(prompt_ids) - 1: -1].float()
        log_p = torch.log_softmax(logits / temperature, dim=-1)
        return (-(log_p.exp() * log_p).sum(-1)).tolist()

    @property
    def device_name(self) -> str:
        return describe_device(self.device)

    def encode_prompt(self, prompt: str) -> list[int]:
        if not isinstance(prompt, str) or not prompt.strip():
            raise EngineError("the prompt is empty")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise EngineError(f"the prompt is {len(prompt):,} characters; at most {MAX_PROMPT_CHARS:,} are accepted")
        text = repair_text(prompt)
        if self.chat:  # chat models answer a user turn; thinking off, where acceptance collapses
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                     enable_thinking=False, tokenize=True, return_dict=False)
            ids = list(ids)
        else:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
        if not ids:
            raise EngineError("the prompt encodes to no tokens: the tokenizer knows none of its text")
        if len(ids) >= self.context_length:
            raise EngineError(f"the prompt is {len(ids)} tokens; this model's context holds {self.context_length}, "
                              f"so the prompt must be at most {self.context_length - 1} tokens")
        return ids

    def new_drafter(self, method: str, config: GenerationConfig | None = None) -> Drafter:
        """A new drafter object for one run of `method`, over the weights `config` calls for: above temperature 0
        the checkpoint trained for sampling where this engine has one (unless config.drafter_weights is
        "greedy"), else the temperature-0 one; its label says which. Where one checkpoint serves both temperatures
        (the same network in both tables), a sampled run drafts with what it holds for sampling (DSpark: the
        confidence calibration fitted at temperature 1)."""
        entry = method_entry(method)
        if not entry.kinds:
            return NoDrafter()
        if method not in self.drafter_models:
            raise EngineError(f"preset {self.preset!r} has no drafter for method {method!r}")
        if entry.tree:  # the chain method's drafter, grown into a tree
            chain_config = replace(config, method=entry.grows_from) if config is not None else None
            return tree_grower(entry).grow(self.new_drafter(entry.grows_from, chain_config), config)
        if config is not None and config.drafter_weights == "no_features":
            if method not in self.ablation_drafter_models:
                raise EngineError(f"preset {self.preset!r} has no {entry.label} drafter trained without the target's "
                                  f"features here (`python -m engine.train dflash --no-target-features` trains it)")
            drafter = implementation(drafter_kind_of(self.ablation_drafter_models[method])).build(
                self.ablation_drafter_models[method], self)
            drafter.label += ", no target features"
            return drafter
        if config is not None and self.uses_sampled_weights(config):
            model = self.sampled_drafter_models[method]
            drafter = implementation(self.sampled_drafter_kinds[method]).build(model, self)
            if model is not self.drafter_models[method]:
                drafter.label += ", trained for T > 0"
            elif drafter.for_sampling():  # the same weights at both temperatures, with what they hold for sampling
                drafter.label += ", calibrated for T > 0"
            return drafter
        return implementation(self.drafter_kinds[method]).build(self.drafter_models[method], self)

    def uses_sampled_weights(self, config: GenerationConfig) -> bool:
        """Whether a run with `config` drafts with the checkpoint trained for sampling."""
        return not config.greedy and config.drafter_weights == "auto" and config.method in self.sampled_drafter_models

    def requests(self, prompt: str, configs) -> list[Request]:
        """Checked requests for `configs` over one prompt, encoded once (engine/contract/types.py checked_requests)."""
        return checked_requests(self, prompt, configs)

    def stream(self, request: Request | str, config: GenerationConfig | None = None) -> Iterator[Step]:
        """Run one checked request (or a prompt and config made into one), each step as it completes (engine/run.py)."""
        return Run(self).stream(as_request(self, request, config))

    def generate(self, request: Request | str, config: GenerationConfig | None = None, stop=None) -> RunResult:
        """The same to completion: the whole trace with its summary (engine/run.py Run.generate)."""
        return Run(self).generate(as_request(self, request, config), stop)

    def max_drafts(self, method: str) -> int | None:
        """The longest draft `method` can make here (a block drafter's trained block), None for no limit."""
        return self.new_drafter(method).max_drafts

    def new_target(self, layer_ids: list[int] | None, length: int):
        """The target for one run that may reach `length` tokens, with a cache of its own (engine/target/request.py)
        and room for a verify of a large tree past it; with CUDA graphs, the engine's one cache and its graphs, where
        the run fits in it."""
        capacity = min(length, self.context_length) + TREE_ROOM
        return target_for(self.target, self.fused_target, layer_ids, capacity, self.verify_width,
                          self.graphed(layer_ids, length))

    def graphed(self, layer_ids: list[int] | None, length: int) -> GraphedVerifies | None:
        """The engine's CUDA graphs for a run reading `layer_ids` that may reach `length` tokens, that verify
        captured on first need (Run._run asks on the thread that starts the run), or None: graphs off, or a run too
        long for their cache (whose last slots the graphs' warm-ups write)."""
        capacity = min(length, self.context_length) + TREE_ROOM
        if not self.cuda_graphs or capacity + VERIFY_WIDTH > GRAPHED_CONTEXT:
            return None
        if self._graphed is None:
            self._graphed = GraphedVerifies(self.fused_target, GRAPHED_CONTEXT)
        self._graphed.prepare(layer_ids)
        return self._graphed
