"""One speculative loop for every method; the baseline is its degenerate case (nothing drafted).

Invariant, kept by explicit lengths: with n tokens committed (prompt + output), the target's KV cache
holds the first n - 1 of them; the newest committed token is the anchor fed first in the next verify
forward, followed by the K drafted tokens. After verification the cache is cropped back to the committed
length minus one, and the drafter is told how many positions are still valid. A tree draft (engine/tree.py) is
the same step with an ancestor-only mask: the cache then keeps the anchor's entry and its accepted path's.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from .background import BackgroundSteps
from .batch import traced_steps
from .contract.methods import method as method_entry, method_names, weightless_kind
from .contract.presets import DEFAULT_PRESET, PRESETS, Preset, ablation_shipped
from .contract.types import MAX_PROMPT_CHARS, EngineError, GenerationConfig, RunResult, Step, check_stop
from .cpu.attention import use_lean_attention
from .cpu.layout import use_column_major_weights, use_packed_vocab_products
from .drafters.base import DraftBlock, Drafter, NoDrafter
from .models import (build_weightless, default_dtype, describe_device, drafter_kind_of, implementation,
                     load_causal_lm, load_drafter, load_tokenizer, pick_device, require_runnable, set_cpu_threads,
                     tree_grower)
from .online import long_output_options
from .rules import drafts_this_step, finish_reason
from .sampling import logits_to_probs, pick, verify
from .scheduler import stored_measurement
from .speed import profile_batch_verify_speed, profile_verify_speed
from .text import TokenTexts, repair_text
from .timing import SpanClock
from .target import GRAPHED_CONTEXT, TREE_ROOM, VERIFY_WIDTH, FusedQwen3, GraphedVerifies, graphs_wanted, target_for
from .trace import DeviceStep, PackedTrace, Tracer, build_result
from .tree import verify_tree


@dataclass
class _RunState:
    """What the device loop carries from step to step."""

    committed_ids: torch.Tensor  # (1, n) prompt and output so far
    num_prompt: int
    max_new_tokens: int
    finish_reason: str | None = None

    @property
    def num_new(self) -> int:
        return self.committed_ids.shape[1] - self.num_prompt


class Engine:
    """The models of one preset on one device, and the runs over them."""

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
        for model in (target, *self.drafter_models.values(), *self.sampled_drafter_models.values(),
                      *self.ablation_drafter_models.values()):  # on the CPU: leaner forwards, the same numbers
            use_lean_attention(model)  # transformers LMs: the verify's mask built directly, grouped KV heads as is
            use_column_major_weights(model)  # linear weights laid out for the CPU's matrix product
            use_packed_vocab_products(model)  # LM heads: a packed copy for products of 4 rows or more
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
        # the target's fused forward (engine/target/fused.py), built on first use (fused_target), after the CPU
        # layout above
        self._fused_target: FusedQwen3 | None = None
        self._fuses = FusedQwen3.supports(target)
        # On CUDA every verify runs at one fixed width (every row computed by the same kernels whatever the lane, and
        # replayable as a CUDA graph); on the CPU each verify costs by its rows, so it runs exactly the rows it has.
        # fixed_width True or False asks for one or the other anywhere (the fused forward computes both).
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

    @classmethod
    def load(cls, preset: str = DEFAULT_PRESET, device: str = "auto", cache_dir: str | None = None,
             offline: bool | None = None, threads: int | None = None, cuda_graphs: str = "auto",
             dtype: str | None = None, check_memory: bool = True, fixed_width: bool | None = None) -> "Engine":
        """Load an allowlisted preset. Hub checkpoints come from the local cache (`cache_dir`, default the
        hub's own) and are downloaded only when the hub is reachable and not `offline`. On the CPU, torch
        runs `threads` threads (default: the preset's choice); this is set for the whole process. On CUDA a
        preset whose weights would not fit the GPU's free memory is refused, unless `check_memory` is False
        (models.require_runnable). fixed_width: every verify at one width (default: on CUDA only; __init__)."""
        if preset not in PRESETS:
            raise EngineError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        spec: Preset = PRESETS[preset]
        torch_device = pick_device(device)
        set_cpu_threads(torch_device, threads if threads is not None else spec.cpu_threads)
        hub = require_runnable(spec, device, torch_device, cache_dir, offline, check_memory)
        dtype = getattr(torch, dtype) if dtype is not None else default_dtype(torch_device, spec.cuda_dtype)
        drafters = {m: load_drafter(name, method_entry(m).kinds, torch_device, dtype, **hub)
                    for m, name in spec.drafters.items()}
        sampled = {m: load_drafter(name, method_entry(m).kinds, torch_device, dtype, **hub)
                   for m, name in spec.sampled_drafters.items()}
        ablations = {m: load_drafter(name, method_entry(m).kinds, torch_device, dtype, **hub)
                     for m, name in spec.ablation_drafters.items() if ablation_shipped(name)}
        target = load_causal_lm(spec.target, torch_device, dtype, **hub)
        return cls(target, load_tokenizer(spec.tokenizer, **hub), drafters, torch_device, preset, chat=spec.chat,
                   sampled_drafter_models=sampled, cuda_graphs=cuda_graphs, ablation_drafter_models=ablations,
                   fixed_width=fixed_width)

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
        if len(ids) >= self.context_length:
            raise EngineError(f"the prompt is {len(ids)} tokens; this model's context holds {self.context_length}, "
                              f"so the prompt must be at most {self.context_length - 1} tokens")
        return ids

    def new_drafter(self, method: str, config: GenerationConfig | None = None) -> Drafter:
        """A new drafter object for one run of `method`, over the weights `config` calls for: above temperature 0
        the checkpoint trained for sampling where this engine has one (unless config.drafter_weights is
        "greedy"), else the temperature-0 one; its label says which."""
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
            drafter = implementation(self.sampled_drafter_kinds[method]).build(self.sampled_drafter_models[method], self)
            drafter.label += ", trained for T > 0"
            return drafter
        return implementation(self.drafter_kinds[method]).build(self.drafter_models[method], self)

    def uses_sampled_weights(self, config: GenerationConfig) -> bool:
        """Whether a run with `config` drafts with the checkpoint trained for sampling."""
        return not config.greedy and config.drafter_weights == "auto" and config.method in self.sampled_drafter_models

    # --- the loop -----------------------------------------------------------------------------------

    def stream(self, prompt: str, config: GenerationConfig) -> Iterator[Step]:
        """Run one generation, yielding each step (the prefill first) as soon as it completes."""
        prompt_ids, drafter = self._prepare(prompt, config)
        yield from self._run(prompt_ids, config, drafter)

    def generate(self, prompt: str, config: GenerationConfig, stop=None) -> RunResult:
        """Run to completion and return the whole trace with its summary. The result's config says what ran: a
        draft length past the drafter's trained block is recorded as that block. stop: a threading.Event seen
        after every step; once set, the run ends and raises Stopped."""
        prompt_ids, drafter = self._prepare(prompt, config)
        steps, run = [], self._run(prompt_ids, config, drafter)
        try:
            for step in run:
                steps.append(step)
                check_stop(stop)
        finally:
            run.close()
        if drafter.max_drafts is not None and config.drafts_per_step > drafter.max_drafts:
            config = replace(config, drafts_per_step=drafter.max_drafts)
        return build_result(self, prompt_ids, config, steps, drafter.label)

    def max_drafts(self, method: str) -> int | None:
        """The longest draft `method` can make here (a block drafter's trained block), None for no limit."""
        return self.new_drafter(method).max_drafts

    def _prepare(self, prompt: str, config: GenerationConfig) -> tuple[list[int], Drafter]:
        """Check everything before any model runs, so bad input fails fast with one clear line."""
        config.validate()
        prompt_ids, drafter = self.encode_prompt(prompt), self.new_drafter(config.method, config)
        if config.drafter_window is not None or config.self_tuning:  # the feature drafters' options (engine/online.py)
            drafter = long_output_options(drafter, config)
        drafter.prepare(config)  # one-time costs (DSpark's verify-speed profile) before any clock starts
        return prompt_ids, drafter

    def _run(self, prompt_ids: list[int], config: GenerationConfig, drafter: Drafter) -> Iterator[Step]:
        """Device work (draft, verify, cache bookkeeping) and host work (the trace, the text) of each step.
        With config.overlap the device loop runs in its own thread, a step or two ahead, so the host work
        of step i happens while step i + 1 drafts and verifies; without it they alternate."""
        clock = SpanClock(self.device)
        tracer = Tracer(self.texts, clock.fork(sync=False))  # host work: its own span list, and no device syncs
        device_steps = self._device_steps(prompt_ids, config, drafter, clock)
        if config.requests_at_once == 1:  # CUDA graphs captured here, before the overlap's device thread starts
            self.graphed(drafter.target_layer_ids, len(prompt_ids) + config.max_new_tokens)
        overlap = config.overlap if config.overlap is not None else self.device.type == "cuda"
        records = BackgroundSteps(device_steps, name="speclab-device-loop") if overlap else device_steps
        try:
            for record in records:
                yield tracer.step(record)
        finally:
            records.close()

    @torch.inference_mode()
    def _device_steps(self, prompt_ids: list[int], config: GenerationConfig, drafter: Drafter,
                      clock: SpanClock) -> Iterator[DeviceStep]:
        """The control flow of decoding: everything the next step depends on, and nothing else."""
        if config.requests_at_once > 1:  # this request among others: the batched loop's steps (engine/batch.py)
            yield from traced_steps(self, prompt_ids, config, drafter, clock)
            return
        generator = torch.Generator(self.device).manual_seed(config.seed)
        ids = torch.tensor([prompt_ids], device=self.device)
        state = _RunState(ids, len(prompt_ids), config.max_new_tokens)
        target = self.new_target(drafter.target_layer_ids, len(prompt_ids) + config.max_new_tokens)
        vocab_size = self.target.config.vocab_size

        with clock.span("verify", "target prefill"):
            logits, features = target.prefill(ids)
            first = pick(logits_to_probs(logits[0, -1], config.temperature), config.temperature, generator).view(1)
        drafter.start(ids, features, clock)
        kept = self._append(state, first.tolist(), first)
        yield DeviceStep(0, "prefill", None, None, None, 0, None, kept, state.finish_reason, clock.take())

        index = 1
        proposal_temperature = 0.0 if config.proposes == "argmax" else config.temperature
        while state.finish_reason is None:
            num_committed = state.committed_ids.shape[1]  # the cache holds all of them but the newest, the anchor
            # 1. draft: K tokens (a chain) or a tree of nodes; the scheduler may verify fewer
            k = self._drafts_this_step(config, state, drafter)
            if k:
                block = drafter.propose(state.committed_ids, k, proposal_temperature, generator, clock)
                if proposal_temperature != config.temperature:  # argmax proposals above 0: q is a point mass
                    block = block.as_point_masses()
            else:  # the baseline, or a last step with room for one token only
                block = DraftBlock(state.committed_ids.new_empty(0), torch.empty(0, vocab_size, device=self.device))
            num_verified = drafter.verify_len(block, config, clock) if k else 0
            checked = block if num_verified == block.ids.numel() else block.head(num_verified)
            confidences = block.confidence_values  # read once: the scheduler's read, if it made one
            # 2. verify: the anchor and the checked drafts in one target forward
            with clock.span("verify", f"target verify, a tree of {num_verified} nodes" if block.is_tree
                            else "target verify"):
                verify_ids = torch.cat([state.committed_ids[:, -1:], checked.ids.view(1, -1)], dim=1)
                tree = (checked.parents, checked.parent_rows) if block.is_tree else ()  # a tree: its shape
                logits, features = target.verify(verify_ids, *tree)
                target_probs = logits_to_probs(logits[0], config.temperature)
                # 3. accept: the rule's verdict, how many drafts stand and the target's own token
                verdict = judge(config, checked, target_probs, generator)
            # 4. commit: the caches keep the anchor and what was accepted; the tokens join the output
            with clock.span("host", "roll back caches, commit"):
                a = verdict.num_accepted
                nodes = list(range(a)) if verdict.path is None else list(verdict.path)  # the accepted drafts
                rows = [0, *(node + 1 for node in nodes)]  # the verify's rows that stand: the anchor's and theirs
                kept_rows = verdict.kept_rows  # a tree's: on the device with its verdict, the entries' and features' index
                if verdict.path is not None and kept_rows is None:
                    kept_rows = torch.tensor(rows, device=self.device)
                target.keep(num_committed - 1, rows, kept_rows)
                if features is not None:  # a chain's are its first rows: a slice, no index from the host
                    features = features[:, : a + 1] if verdict.path is None else features[:, kept_rows]
                drafter.accept(num_committed + a, features)
                kept = self._append(state, list(verdict.committed_ids), verdict.committed)
                # the step's figures for its trace, gathered here and sent to the host in one copy
                trace = PackedTrace(block, verdict, target_probs, len(checked.ids)) if block.ids.numel() else None
            yield DeviceStep(index, "decode", block, verdict, target_probs, len(checked.ids), confidences, kept,
                             state.finish_reason, clock.take(), trace=trace)
            index += 1

    def new_target(self, layer_ids: list[int] | None, length: int):
        """The target for one run that may reach `length` tokens, with a cache of its own (engine/target/request.py) and
        room for a verify of a large tree past it; with CUDA graphs, the engine's one cache and its graphs, where
        the run fits in it."""
        capacity = min(length, self.context_length) + TREE_ROOM
        return target_for(self.target, self.fused_target, layer_ids, capacity, self.verify_width,
                          self.graphed(layer_ids, length))

    def graphed(self, layer_ids: list[int] | None, length: int) -> GraphedVerifies | None:
        """The engine's CUDA graphs for a run reading `layer_ids` that may reach `length` tokens, that verify
        captured on first need (_run asks on the thread that starts the run), or None: graphs off, or a run too
        long for their cache (whose last slots the graphs' warm-ups write)."""
        capacity = min(length, self.context_length) + TREE_ROOM
        if not self.cuda_graphs or capacity + VERIFY_WIDTH > GRAPHED_CONTEXT:
            return None
        if self._graphed is None:
            self._graphed = GraphedVerifies(self.fused_target, GRAPHED_CONTEXT)
        self._graphed.prepare(layer_ids)
        return self._graphed

    def _drafts_this_step(self, config: GenerationConfig, state: _RunState, drafter: Drafter) -> int:
        return drafts_this_step(config, drafter.max_drafts, state.num_new, state.committed_ids.shape[1],
                                self.context_length)

    def _append(self, state: _RunState, new_ids: list[int], on_device: torch.Tensor) -> list[int]:
        """Append new tokens (`new_ids` on the host, the same on the device), stopping at end-of-text,
        max_new_tokens or the context limit; returns those kept."""
        kept = []
        for token_id in new_ids:
            kept.append(token_id)
            state.finish_reason = finish_reason(token_id, state.committed_ids.shape[1] + len(kept), state.num_prompt,
                                                self.eos_id, state.max_new_tokens, self.context_length)
            if state.finish_reason is not None:
                break
        kept_tensor = on_device[: len(kept)].view(1, -1).to(state.committed_ids.dtype)
        state.committed_ids = torch.cat([state.committed_ids, kept_tensor], dim=1)
        return kept


def judge(config: GenerationConfig, checked: DraftBlock, target_probs: torch.Tensor, generator: torch.Generator):
    """The verdict on the drafts sent to the target: a tree's walk (engine/tree.py) or a chain's rule
    (engine/sampling.py), at the run's temperature."""
    if checked.is_tree:
        return verify_tree(config.temperature, checked.ids, checked.probs, checked.parents, target_probs, generator,
                           checked.host_ids)
    return verify(config.verify_rule, config.temperature, checked.ids, checked.probs, target_probs, generator)
