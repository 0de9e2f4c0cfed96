"""The target model of one run and the KV cache it owns: prefill, verify, keep.

Every speculative loop asks the same three things of the target (engine/loop.py):

- `prefill(ids)`: read the prompt; the logits of its last position and the features block drafters read;
- `verify(ids, parents=None)`: read the anchor and the drafted tokens after the cache, a chain (each token sees
  those before it) or a tree (`parents`: each node sees its own ancestors only, at the position its depth gives);
  the logits and features of every row;
- `keep(length, rows)`: after verification, keep the cache's first `length` entries and then the verify's rows
  `rows` (a chain: the anchor and the accepted drafts, its first rows; a tree: the anchor and the accepted path).

The cache's length is a host integer, counted here, never read back from the device.

`Target` runs Qwen3-architecture models (the embedded family and the Qwen3 presets) with a forward of its own over
a cache preallocated for the run (one key and one value tensor per layer, written in place), with the query, key
and value projections as one product and the MLP's gate and up projections as another, RoPE applied to queries and
keys together, and norms as one operation each: the arithmetic of transformers' Qwen3 layers in about a third of
its dispatched operations (tests/engine/test_target.py counts them and checks its greedy output against
transformers'). A chain's rollback is a new length, nothing copied; a tree's keeps its path with one index for
every layer. Any other architecture runs through transformers' own forward and cache (`TransformersTarget`), with
the same three calls.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

from .contract.types import MAX_DRAFTS, MAX_TREE_NODES, EngineError, tree_depths
from .models import crop_cache, forward_with_features, keep_cache_entries, new_cache
from .ragged import RaggedCache, padded
from .scheduler import BATCH_PROFILE_SIZES, batch_cost_from_timings, steps_per_s_from_timings
from .tree import verify_inputs


# Rows of every fixed-width verify: the smallest power of two that holds the anchor and the largest tree (or block) any
# lane may send, so the baseline's one-token steps, every chain and every tree run the same shapes, and a row's
# numbers cannot depend on the lane (another GEMM height may pick another kernel, another order of sums).
VERIFY_WIDTH = 1 << max(MAX_TREE_NODES, MAX_DRAFTS).bit_length()
TREE_ROOM = VERIFY_WIDTH + 8  # cache positions a run keeps free past its longest output: a fixed-width verify
GRAPHED_CONTEXT = 4096  # positions of the one cache CUDA graphs are captured over; longer runs verify eagerly
CUDA_GRAPHS = ("auto", "on", "off")
FUSED_ATTENTION_DEVICES = ("cuda",)  # where a masked attention folds grouped heads into rows (attend): one kernel
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


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """transformers' rotate_half: the second half of the last dimension, negated, before the first."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class _Layer:
    """One Qwen3 decoder layer's weights as the fused forward reads them."""

    def __init__(self, layer: nn.Module):
        attn, mlp = layer.self_attn, layer.mlp
        self.qkv = _joined([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
        self.o = attn.o_proj.weight
        self.gate_up = _joined([mlp.gate_proj.weight, mlp.up_proj.weight])
        self.down = mlp.down_proj.weight
        self.q_norm, self.k_norm = attn.q_norm.weight, attn.k_norm.weight
        self.input_norm, self.post_norm = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        self.scaling = attn.scaling


def _joined(weights: list[torch.Tensor]) -> torch.Tensor:
    """Linear weights stacked along their outputs, one product for all of them, in the layout the first one has
    (engine/cpu/layout.py lays float32 CPU weights out column by column). Off the CPU the model's own weights become
    views of the stacked one, so it costs no memory (a Qwen3-4B's projections would otherwise take 4.7 GB more); on
    the CPU they stay as they are, laid out for transformers' own forward too."""
    joined = torch.cat([w.detach() for w in weights], dim=0)
    first = weights[0]
    if first.dim() == 2 and first.shape[1] > 1 and first.stride() == (1, first.shape[0]):  # column-major
        joined = joined.t().contiguous().t()
    elif first.device.type != "cpu":
        at = 0
        for weight in weights:
            weight.data = joined[at: at + weight.shape[0]]
            at += weight.shape[0]
    return joined


class FusedQwen3:
    """A transformers Qwen3ForCausalLM's weights, arranged for the fused forward; built once per engine and shared
    by every run's Target. The model itself is kept: its embedding, rotary embedding, final norm and LM head (and
    any CPU layout given them) are called as they are."""

    def __init__(self, model: nn.Module):
        config = model.config
        self.model = model
        self.layers = [_Layer(layer) for layer in model.model.layers]
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.eps = config.rms_norm_eps
        self.num_layers = len(self.layers)

    @staticmethod
    def supports(model: nn.Module) -> bool:
        """A Qwen3 causal LM with full attention everywhere and no attention bias: what `forward` computes."""
        config = getattr(model, "config", None)
        return (type(model).__name__ == "Qwen3ForCausalLM" and not getattr(config, "attention_bias", False)
                and not getattr(config, "use_sliding_window", False)
                and all(t == "full_attention" for t in (getattr(config, "layer_types", None) or ["full_attention"])))

    def new_cache(self, capacity: int, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values for `capacity` positions, every layer: (layers, batch, kv_heads, capacity, head_dim)."""
        weight = self.layers[0].o
        shape = (self.num_layers, batch, self.kv_heads, capacity, self.head_dim)
        return (torch.zeros(shape, dtype=weight.dtype, device=weight.device),
                torch.zeros(shape, dtype=weight.dtype, device=weight.device))

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                start: "int | torch.Tensor | RowSlots", mask: torch.Tensor | None, causal: bool,
                layer_ids: list[int] | None,
                logits_at: int | torch.Tensor = 0, cache: DynamicCache | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Read `ids` (B, S) at `positions` (B, S), their keys and values written to the cache's slots
        start..start + S − 1, each query seeing the slots before `start` and the new ones `mask` (B, 1, S,
        start + S; True = may attend) allows, or with no mask all of them (`causal`: each new token only those up
        to itself). Returns logits at `logits_at` (0: every row; an int k > 0: the last k; a tensor: those rows)
        and the features of `layer_ids` (B, S, len · H), or None.

        With `start` a tensor of slots (S,) instead, every shape is fixed by the inputs' alone, with no host integer
        (what a CUDA graph replays): row r's key and value are written to slot start[r], and each query attends the
        whole cache as `mask` (B, 1, S, capacity) allows.

        With `start` a RowSlots (a batch, BatchTarget), row b's new keys and values are written to its own slots
        of the cache rows it names, and each query attends its row's slots before `start.end` as `mask` (B, 1, S,
        end) allows.

        With a transformers `cache` instead (a drafter's ragged cache in a batch, engine/ragged.py), each layer's
        new keys and values are appended to it and every query attends all of its entries as `mask` allows (`keys`,
        `values` and `start` unused)."""
        model = self.model.model
        batch, length = ids.shape
        end = start + length if isinstance(start, int) else None
        hidden = model.embed_tokens(ids)
        cos, sin = model.rotary_emb(hidden, positions)
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, S, D): one rotation for every head
        wanted = set(layer_ids or ())
        features = {}  # layer index -> its output (transformers' hidden_states[index + 1])
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        fold = mask is not None and hidden.device.type in FUSED_ATTENTION_DEVICES  # one kernel, masked (attend)
        if fold:
            mask = folded_mask(mask, h // kv, hidden.dtype)
        for index, layer in enumerate(self.layers):
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer.input_norm, self.eps)
            qkv = F.linear(x, layer.qkv).view(batch, length, h + 2 * kv, d)
            q = F.rms_norm(qkv[:, :, :h], (d,), layer.q_norm, self.eps)
            k = F.rms_norm(qkv[:, :, h: h + kv], (d,), layer.k_norm, self.eps)
            qk = torch.cat([q, k], dim=2).transpose(1, 2)  # (B, h + kv, S, D)
            qk = qk * cos + rotate_half(qk) * sin
            every_key, every_value = _cached(index, qk[:, h:], qkv[:, :, h + kv:].transpose(1, 2), keys, values,
                                             start, end, cache)
            attended = attend(qk[:, :h], every_key, every_value, mask, causal, layer.scaling, fold)
            hidden = hidden + F.linear(attended.transpose(1, 2).reshape(batch, length, h * d), layer.o)
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer.post_norm, self.eps)
            gate, up = F.linear(x, layer.gate_up).chunk(2, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, layer.down)
            if index in wanted:
                features[index] = hidden
        if isinstance(logits_at, int):
            kept = hidden[:, -logits_at:] if logits_at > 0 else hidden
        else:
            kept = hidden[:, logits_at]
        logits = self.model.lm_head(model.norm(kept))
        if layer_ids is None:
            return logits, None
        return logits, torch.cat([features[i] for i in layer_ids], dim=-1)


def folded_mask(mask: torch.Tensor, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (B, 1, S, K), True = may attend, as `attend` reads it folded: additive (0 or −inf) in the
    queries' dtype, its S rows repeated for each of the `groups` query heads that share a key head. Built once a
    forward, not once a layer (SDPA would convert a boolean mask in every call)."""
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    return additive.repeat(1, 1, groups, 1)


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None, causal: bool,
           scale: float, fold: bool) -> torch.Tensor:
    """Queries (B, h, S, D) over keys and values (B, kv, K, D), kv dividing h. Unmasked (a prefill, `causal`; a
    step that sees everything), SDPA reads the shared key heads itself (`enable_gqa`), which its flash kernel
    does on CUDA. With a mask, CUDA's fused kernels take no grouped heads (torch would fall back to its math
    kernel, about ten kernels a layer), so with `fold` the h / kv query heads that share a key head are stacked
    along the rows instead, (B, kv, h / kv · S, D), equal heads under a mask of as many rows (folded_mask): what
    the memory-efficient kernel runs in one call, every query row computed as before. The CPU keeps the grouped
    call, whose numbers transformers' SDPA path gives too."""
    batch, heads, rows, dim = q.shape
    if not fold:
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal and mask is None
                                              and rows > 1, scale=scale, enable_gqa=heads != keys.shape[1])
    stacked = q.reshape(batch, keys.shape[1], heads // keys.shape[1] * rows, dim)
    return F.scaled_dot_product_attention(stacked, keys, values, attn_mask=mask, scale=scale).view(
        batch, heads, rows, dim)


class RowSlots:
    """Where a batch's new keys and values go in a cache preallocated for many rows (BatchTarget): the cache rows
    `rows` (a slice), row b's new entry j at slot `slots[b, j]`; queries attend each row's slots before `end` (a host
    integer), as the mask allows."""

    def __init__(self, rows: slice, slots: torch.Tensor, end: int):
        self.rows, self.slots, self.end = rows, slots, end
        self.row_index = torch.arange(slots.shape[0], device=slots.device)[:, None].expand_as(slots)


def _cached(index: int, new_keys: torch.Tensor, new_values: torch.Tensor, keys: torch.Tensor | None,
            values: torch.Tensor | None, start: int | torch.Tensor | RowSlots, end: int | None,
            cache: DynamicCache | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `index`'s new keys and values written to the cache FusedQwen3.forward was given (transformers' `cache`;
    else the preallocated `keys` and `values`, at the slots `start` holds, or at start..end), and every key and value
    its queries may attend."""
    if cache is not None:
        return cache.update(new_keys, new_values, index)
    if isinstance(start, RowSlots):  # a batch: (B, kv, S, D) new entries, each row at slots of its own
        layer_keys, layer_values = keys[index, start.rows], values[index, start.rows]
        layer_keys[start.row_index, :, start.slots] = new_keys.transpose(1, 2)
        layer_values[start.row_index, :, start.slots] = new_values.transpose(1, 2)
        return layer_keys[:, :, : start.end], layer_values[:, :, : start.end]
    if end is None:  # fixed shapes: the slots are a tensor, and the whole cache is attended under the mask
        keys[index].index_copy_(2, start, new_keys)
        values[index].index_copy_(2, start, new_values)
        return keys[index], values[index]
    keys[index, :, :, start:end] = new_keys
    values[index, :, :, start:end] = new_values
    return keys[index, :, :, :end], values[index, :, :, :end]


class Target:
    """One run's target: the fused Qwen3 forward over a cache of its own, preallocated for `capacity` positions
    (grown, by copying into a larger one, should a run need more).

    `width`: None verifies exactly the rows it is given (the CPU's way: its cost grows with every row). A number W
    pads every verify to that fixed width (VERIFY_WIDTH holds the largest tree and block; a wider verify is refused)
    over the whole cache with a mask, so every verify of every run, the baseline's one-token steps included, runs
    the same kernels on the same shapes: a row's numbers do not depend on how many rows were verified beside it,
    and a GPU can replay the forward as a CUDA graph (`graphs`: the engine's captured graphs, shared by its runs
    with `cache`, the engine's one cache they were captured over)."""

    def __init__(self, fused: FusedQwen3, layer_ids: list[int] | None, capacity: int, width: int | None = None,
                 graphs: "GraphedVerifies | None" = None):
        self.fused = fused
        self.layer_ids = layer_ids
        self.width = width
        self.graphs = graphs
        if graphs is not None:  # the cache the graphs read and write: the engine's, of a fixed size
            self.keys, self.values = graphs.keys, graphs.values
        else:
            self.keys, self.values = fused.new_cache(capacity)
        self.length = 0  # cache entries that stand: a host integer, never read back from the device
        self._arange = torch.arange(self.capacity, device=self.keys.device)

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]

    def _reserve(self, end: int) -> None:
        if end <= self.capacity:
            return
        if self.graphs is not None:
            raise ValueError(f"a graphed target holds {self.capacity} positions; {end} asked for")
        capacity = max(end, 2 * self.capacity)
        keys, values = self.fused.new_cache(capacity)
        keys[:, :, :, : self.length] = self.keys[:, :, :, : self.length]
        values[:, :, :, : self.length] = self.values[:, :, :, : self.length]
        self.keys, self.values = keys, values
        self._arange = torch.arange(capacity, device=keys.device)

    def prefill(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The prompt (1, n) into an empty cache: logits of its last position (1, 1, V) and the features of every
        position (1, n, F) or None."""
        n = ids.shape[1]
        self._reserve(n + (self.width or 0))
        self.length = 0
        positions = self._arange[:n][None]
        logits, features = self.fused.forward(ids, positions, self.keys, self.values, 0, None, True, self.layer_ids,
                                              logits_at=1)
        self.length = n
        return logits, features

    def verify(self, ids: torch.Tensor, parents: tuple[int, ...] | None = None,
               parent_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Rows (1, 1 + N) after the cache: the anchor, then a chain of drafts or, with `parents`, a tree's nodes
        (engine/tree.py; `parent_rows`: each row's parent's row on the device, where the drafter has them there).
        Logits (1, 1 + N, V) and features (1, 1 + N, F) of every row. The rows' entries are written after the
        cache's; `keep` says which of them stand."""
        if self.width is not None:
            return self._verify_fixed(ids, parents, parent_rows)
        start, rows = self.length, ids.shape[1]
        end = start + rows
        self._reserve(end)
        if parents is None:  # a chain: row r sits at start + r and sees every key up to its own
            positions = self._arange[start:end][None]
            mask = None if rows == 1 else (self._arange[:end][None, :] <= positions[0][:, None])[None, None]
        else:
            positions, sees = self._tree_inputs(parents, start, parent_rows)
            mask = torch.cat([sees.new_ones(rows, start), sees], dim=1)[None, None]
        return self.fused.forward(ids, positions, self.keys, self.values, start, mask, False, self.layer_ids)

    def _verify_fixed(self, ids: torch.Tensor, parents: tuple[int, ...] | None, parent_rows: torch.Tensor | None):
        """The verify at a fixed width: `rows` real rows, then padding rows (token 0, each at the slot after the
        last, seeing every slot up to its own) whose entries land past the cache's length and are never kept."""
        start, rows = self.length, ids.shape[1]
        width = self.width
        if rows > width:
            raise EngineError(f"a verify of {rows} rows is wider than this target's fixed width of {width}")
        self._reserve(start + width)
        slots = self._arange[start: start + width]
        mask = self._arange[None, :] <= slots[:, None]  # (width, capacity): a chain, padding rows alike
        positions = slots.clone()
        if parents is not None:
            tree_positions, sees = self._tree_inputs(parents, start, parent_rows)
            positions[:rows] = tree_positions[0]
            mask[:rows, start: start + rows] = sees
        padded = ids.new_zeros(1, width)
        padded[:, :rows] = ids
        if self.graphs is not None:
            logits, features = self.graphs.replay(self.layer_ids, padded, positions[None], slots, mask[None, None])
        else:
            logits, features = self.fused.forward(padded, positions[None], self.keys, self.values, slots,
                                                  mask[None, None], False, self.layer_ids)
        return logits[:, :rows], features[:, :rows] if features is not None else None

    def _tree_inputs(self, parents: tuple[int, ...], start: int, parent_rows: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """A tree verify's positions (1, 1 + N) and which of its own rows each row sees (1 + N, 1 + N), built on the
        device from each row's parent's row (`parent_rows`, the drafter's, else one small tensor sent from
        `parents`): a row sees the anchor, its ancestors and itself, and sits at the position its depth gives.
        Every row walks up one level at a time, all rows together."""
        n = len(parents)
        device = self.keys.device
        if parent_rows is None:  # row r's parent's row; 0: the anchor
            parent_rows = torch.tensor([0, *(p + 1 for p in parents)], device=device)
        rows = self._arange[: n + 1]
        sees = torch.eye(n + 1, dtype=torch.bool, device=device)
        seen = sees.new_ones(n + 1)  # the values written, made on the device (a Python True would be copied there)
        depth = torch.zeros(n + 1, dtype=torch.long, device=device)
        ancestor = rows
        for _ in range(max(tree_depths(parents), default=0)):
            depth += ancestor != 0
            ancestor = parent_rows[ancestor]
            sees.index_put_((rows, ancestor), seen)
        return (depth + start)[None], sees

    def keep(self, length: int, rows: list[int] | None = None, index: torch.Tensor | None = None) -> None:
        """Keep the cache's first `length` entries and then the last verify's rows `rows` (offsets from its anchor,
        ascending; None: none). A chain keeps its first rows, already in place, so only the length changes; a
        tree's path is copied down behind the context with one index for every layer (`index`: `rows` already on
        the device, where the caller has them there, so nothing more is sent)."""
        rows = rows or []
        if length == self.length and rows == list(range(len(rows))):  # in place
            self.length = length + len(rows)
            return
        if rows:
            source = (index if index is not None else torch.tensor(rows, device=self.keys.device)) + self.length
            for tensor in (self.keys, self.values):
                tensor[:, :, :, length: length + len(rows)] = tensor.index_select(3, source)
        self.length = length + len(rows)


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


class BatchTarget:
    """The target of a batch of requests (engine/batch.py), with the fused forward over a cache preallocated for
    `rows` requests (grown, by copying into a longer one, should they need more positions). Row b holds request b's
    entries from slot 0, its length a host integer: a step writes each request's anchor and drafts at its own slots
    and keeps what it accepts by a new length, nothing copied. Requests join (their prompts read straight into rows
    of their own), each step verifies every request's anchor and drafts in one forward, `keep` says what each
    request keeps, and `select` lets finished requests leave (the one copy: the staying rows moved up)."""

    def __init__(self, fused: FusedQwen3, layer_ids: list[int] | None, device: torch.device, rows: int,
                 capacity: int = 256):
        self.fused = fused
        self.layer_ids = layer_ids
        self.device = device
        self.keys, self.values = fused.new_cache(capacity, rows)
        self.lengths: list[int] = []

    @property
    def size(self) -> int:
        return len(self.lengths)

    def join(self, prompts: list[list[int]]) -> tuple[torch.Tensor, list[int], torch.Tensor | None]:
        """Read the joining requests' prompts in one forward into rows after the batch's. Returns the logits at the
        distinct prompt ends (J, E, V), those ends (positions, ascending), and the features of every prompt position
        (J, longest, F) or None."""
        counts = [len(p) for p in prompts]
        ends = sorted({n - 1 for n in counts})
        first = self.size
        self.lengths += [0] * len(prompts)
        logits, features = self._forward(first, padded(prompts, self.device), counts,
                                         torch.tensor(ends, device=self.device))
        self._keep(first, [range(n) for n in counts])
        return logits, ends, features

    def verify(self, tokens: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Every request's anchor and drafts after its entries, in one forward: `tokens` (B, S) on the device, row
        b's first counts[b] real. The logits (B, S, V) and features (B, S, F) of every slot."""
        return self._forward(0, tokens, counts)

    def keep(self, kept: list[list[int]]) -> None:
        """Request b keeps its last forward's first len(kept[b]) slots (an anchor and its accepted drafts: a new
        length each, nothing moved)."""
        self._keep(0, kept)

    def _keep(self, first: int, kept) -> None:
        for b, offsets in enumerate(kept, start=first):
            if list(offsets) != list(range(len(offsets))):
                raise ValueError("a batch keeps the first slots of each request's verify")
            self.lengths[b] += len(offsets)

    def select(self, rows: list[int]) -> None:
        """Keep only the requests `rows` (in that order), moved up to the first rows: the others have finished."""
        if rows == list(range(len(rows))):
            self.lengths = self.lengths[: len(rows)]
            return
        width = max((self.lengths[r] for r in rows), default=0)
        index = torch.tensor(rows, device=self.device)
        for tensor in (self.keys, self.values):
            tensor[:, : len(rows), :, :width] = tensor[:, :, :, :width].index_select(1, index)
        self.lengths = [self.lengths[r] for r in rows]

    def _reserve(self, rows: int, end: int) -> None:
        """Room for `rows` requests and `end` positions each: a larger cache, the entries copied over, when not."""
        have_rows, have = self.keys.shape[1], self.keys.shape[3]
        if rows <= have_rows and end <= have:
            return
        keys, values = self.fused.new_cache(max(end, 2 * have) if end > have else have, max(rows, have_rows))
        width = max(self.lengths, default=0)
        keys[:, :have_rows, :, :width] = self.keys[:, :, :, :width]
        values[:, :have_rows, :, :width] = self.values[:, :, :, :width]
        self.keys, self.values = keys, values

    def _forward(self, first: int, tokens: torch.Tensor, counts: list[int], logits_at=0):
        """Rows first..first + B − 1 read `tokens` (B, S), row b's first counts[b] its own: new entry j of row b at
        slot lengths[b] + j, at position lengths[b] + j, seeing its row's entries and its own new ones up to itself.
        Padding slots (j ≥ counts[b]) repeat the last real one's position and view, so every softmax row has a key;
        they are written past the row's length, never kept. Lengths and counts reach the device in one copy."""
        batch, slots = tokens.shape
        lengths = self.lengths[first: first + batch]
        end = max(lengths) + slots
        self._reserve(first + batch, end)
        host = torch.tensor([lengths, counts])
        if self.device.type == "cuda":
            host = host.pin_memory()
        sizes = host.to(self.device, non_blocking=True)  # (2, B): lengths, counts
        offsets = torch.arange(slots, device=self.device)
        last = torch.minimum(offsets[None, :], (sizes[1] - 1).clamp_min(0)[:, None])  # (B, S)
        positions = sizes[0][:, None] + last
        mask = torch.arange(end, device=self.device)[None, None, :] <= positions[:, :, None]  # (B, S, end)
        where = RowSlots(slice(first, first + batch), sizes[0][:, None] + offsets[None, :], end)
        return self.fused.forward(tokens, positions, self.keys, self.values, where, mask[:, None], False,
                                  self.layer_ids, logits_at)


class RaggedBatchTarget:
    """The same calls over transformers' own forward and a ragged DynamicCache (engine/ragged.py): a batch of any
    architecture FusedQwen3 does not compute."""

    def __init__(self, model: nn.Module, layer_ids: list[int] | None, device: torch.device):
        self.model = model
        self.layer_ids = layer_ids
        self.device = device
        self.cache = RaggedCache(new_cache(model), 0, device)

    @property
    def size(self) -> int:
        return len(self.cache.lengths)

    def join(self, prompts: list[list[int]]) -> tuple[torch.Tensor, list[int], torch.Tensor | None]:
        counts = [len(p) for p in prompts]
        ends = sorted({n - 1 for n in counts})
        joining = RaggedCache(new_cache(self.model), len(prompts), self.device)
        logits, features = ragged_forward(self.model, None, joining, padded(prompts, self.device), counts,
                                          self.layer_ids, torch.tensor(ends, device=self.device))
        joining.keep([list(range(n)) for n in counts])
        self.cache.extend(joining)
        return logits, ends, features

    def verify(self, tokens: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        return ragged_forward(self.model, None, self.cache, tokens, counts, self.layer_ids)

    def keep(self, kept: list[list[int]]) -> None:
        self.cache.keep(kept)

    def select(self, rows: list[int]) -> None:
        self.cache.select(rows)


def batch_target_for(model: nn.Module, fused: FusedQwen3 | None, layer_ids: list[int] | None,
                     device: torch.device, rows: int, capacity: int = 256):
    """A batch's target over `model`: the fused forward over a cache preallocated for `rows` requests of `capacity`
    positions where it has one, else transformers' over a ragged one."""
    if fused is not None:
        return BatchTarget(fused, layer_ids, device, rows, capacity)
    return RaggedBatchTarget(model, layer_ids, device)


def ragged_forward(model: nn.Module, fused: FusedQwen3 | None, cache: RaggedCache, tokens: torch.Tensor,
                   counts: list[int], layer_ids: list[int] | None, logits_at=0):
    """One forward of a batch's new tokens (B, S), row b's first counts[b] real, appended to its ragged `cache`
    (engine/ragged.py): the fused forward where there is one, else transformers'. Logits (and features of
    `layer_ids`) of every slot, or at `logits_at`."""
    inputs = cache.causal_inputs(counts)
    if fused is None:
        return forward_with_features(model, tokens, cache.cache, layer_ids, logits_at, **inputs)
    mask = inputs.get("attention_mask")
    width, slots = cache._width_before, tokens.shape[1]
    if mask is None and slots > 1:  # no padding anywhere: each new token sees the cache and itself, causally
        keys = torch.arange(width + slots, device=tokens.device)
        mask = (keys[None, :] <= width + torch.arange(slots, device=tokens.device)[:, None])[None, None]
    return fused.forward(tokens, inputs["position_ids"], None, None, 0, mask, False, layer_ids, logits_at,
                         cache=cache.cache)


class TransformersTarget:
    """The same three calls over transformers' own forward and DynamicCache: any architecture FusedQwen3 does not
    compute."""

    def __init__(self, model: nn.Module, layer_ids: list[int] | None):
        self.model = model
        self.layer_ids = layer_ids
        self.cache: DynamicCache = new_cache(model)
        self.length = 0

    def prefill(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.cache = new_cache(self.model)
        logits, features = forward_with_features(self.model, ids, self.cache, self.layer_ids, logits_to_keep=1)
        self.length = ids.shape[1]
        return logits, features

    def verify(self, ids: torch.Tensor, parents: tuple[int, ...] | None = None,
               parent_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        device = ids.device
        inputs = verify_inputs(parents, self.length, device) if parents is not None else {}
        return forward_with_features(self.model, ids, self.cache, self.layer_ids, **inputs)

    def keep(self, length: int, rows: list[int] | None = None, index: torch.Tensor | None = None) -> None:
        rows = rows or []
        if length == self.length and rows == list(range(len(rows))):
            crop_cache(self.cache, length + len(rows))
        else:
            keep_cache_entries(self.cache, length, [self.length + r for r in rows])
        self.length = length + len(rows)


def fused_forward(model: nn.Module) -> FusedQwen3 | None:
    """`model`'s fused forward, built once and kept on the model (a drafter's small LM: every run's drafter reads
    the same weights), or None where FusedQwen3 does not compute it."""
    if not FusedQwen3.supports(model):
        return None
    fused = model.__dict__.get("_speclab_fused")
    if fused is None:
        fused = model.__dict__["_speclab_fused"] = FusedQwen3(model)
    return fused


def target_for(model: nn.Module, fused: FusedQwen3 | None, layer_ids: list[int] | None, capacity: int,
               width: int | None = None, graphs: GraphedVerifies | None = None):
    """One run's target over `model`: the fused forward where it has one (`fused`; at a fixed `width`, replayed
    from `graphs` where given), else transformers'."""
    if fused is not None:
        return Target(fused, layer_ids, capacity, width, graphs)
    return TransformersTarget(model, layer_ids)


def profile_verify_speed(target, vocab_size: int, max_tokens: int, context: int = 128) -> list[float]:
    """SPS(n), verify steps per second for n = 1..max_tokens tokens, of a run's `target` (a fresh one: its cache is
    written over) after a `context`-token prompt, smoothed through the linear cost model; index 0 holds 0.0."""
    return steps_per_s_from_timings(time_verifies(target, vocab_size, range(1, max_tokens + 1), context))


@torch.inference_mode()
def time_verifies(target, vocab_size: int, sizes, context: int = 128, repeats: int = 9) -> list[float]:
    """Seconds per `target.verify` of n tokens after a `context`-token prompt, for each n in `sizes` (median_times;
    the cache is rolled back to the prompt after each). What DSpark's scheduler and the device check read as the
    verify's cost."""
    device = _device_of(target)
    generator = torch.Generator().manual_seed(0)
    target.prefill(torch.randint(2, vocab_size, (1, context), generator=generator).to(device))
    blocks = [torch.randint(2, vocab_size, (1, n), generator=generator).to(device) for n in sizes]
    return median_times(device, [(lambda b=block: target.verify(b), lambda: target.keep(context)) for block in blocks],
                        repeats)


def median_times(device: torch.device, calls, repeats: int) -> list[float]:
    """Seconds per `run()` of each (run, reset) in `calls`, `reset()` after each run, untimed: the median of
    `repeats` after one warm-up round, the calls interleaved so a burst of load hits all alike."""
    import time

    times: list[list[float]] = [[] for _ in calls]
    for r in range(repeats + 1):
        for i, (run, reset) in enumerate(calls):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if r:
                times[i].append(time.perf_counter() - start)
            reset()
    return [sorted(t)[len(t) // 2] for t in times]


def profile_batch_verify_speed(model: nn.Module, fused: FusedQwen3 | None, device: torch.device, context: int = 128,
                               repeats: int = 5) -> tuple[float, float]:
    """(a, b) of t(N) = a + b·N: seconds per verify of B rows of S new tokens (N = B · S) by the batch's own target
    (batch_target_for: the fused forward over a preallocated cache where `fused` computes the model) over
    `context`-token requests, the median of `repeats` for each (B, S) in BATCH_PROFILE_SIZES, fitted by least
    squares (engine/scheduler.py batch_cost_from_timings). What DSpark's scheduler reads as a batch's cost."""
    shapes = BATCH_PROFILE_SIZES
    return batch_cost_from_timings(shapes, time_batch_verifies(model, fused, device, shapes, context, repeats))


@torch.inference_mode()
def time_batch_verifies(model: nn.Module, fused: FusedQwen3 | None, device: torch.device, shapes,
                        context: int = 128, repeats: int = 5) -> list[float]:
    """Seconds per batch verify of each (rows, new tokens) in `shapes` after `context`-token prompts (median_times).
    A verify keeps nothing, so each finds the same cache."""
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    batches = {}
    for rows in sorted({r for r, _ in shapes}):
        batches[rows] = batch_target_for(model, fused, None, device, rows, capacity=context + max(s for _, s in shapes))
        batches[rows].join(torch.randint(2, vocab, (rows, context), generator=generator).tolist())
    blocks = [torch.randint(2, vocab, shape, generator=generator).to(device) for shape in shapes]
    return median_times(device, [(lambda b=block: batches[b.shape[0]].verify(b, [b.shape[1]] * b.shape[0]),
                                  lambda b=block: batches[b.shape[0]].keep([[] for _ in range(b.shape[0])]))
                                 for block in blocks], repeats)


def _device_of(target) -> torch.device:
    return target.keys.device if isinstance(target, Target) else next(target.model.parameters()).device
