"""Training the DFlash drafter on our frozen target (after the DFlash paper's recipe).

Each window of corpus text goes through the frozen target once, which gives the context features (the
hidden states of the drafter's 5 target layers) and the target's own next-token distributions. Then many
blocks are cut from the same window at random anchor positions and drafted in one batched forward:
inside a block attention is bidirectional; a block sees the context features strictly before its anchor,
and nothing of other blocks. Labels are the target's distributions (so the drafter learns what the target
would write, not what the corpus says), with the loss of block position k weighted exp(−(k−1)/γ). The last
phase (the greedy phase, train/__main__.py) trains on the target's greedy continuations with the target's
argmax as the label: the next token itself, as in the paper's training on target-written responses, and the
only thing that decides acceptance at temperature 0. The embedding table and LM head are the target's, frozen.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import Qwen3Config

from ..drafters.dflash_model import DFlashDraftModel, evenly_spaced_layers
from .selfdata import PREFIX_TOKENS
from .teacher import RowTeacher, row_teacher, target_outputs

BLOCK_SIZE = 8  # anchor + 7 drafted tokens
GAMMA = 4.0  # position-weight decay for block size 8
PAPER_GAMMA = {8: 4.0, 10: 5.0, 16: 7.0}  # the DFlash paper's decay for each block size it trains (gamma_for)
ANCHORS_PER_WINDOW = 32  # blocks cut from each window: more supervision per target forward
DRAFT_LAYERS = 3  # one layer drafted worse than it saved here (docs/experiments.md: τ 1.89 against 2.29)


def dflash_config(target_config: Qwen3Config, mask_token_id: int, block_size: int = BLOCK_SIZE,
                  layers: int = DRAFT_LAYERS, target_features: bool = True) -> Qwen3Config:
    """The target's config with z-lab's DFlash fields: `dflash_config` naming the target layers read and the
    mask token, and at the top level `block_size` and `num_target_layers`, which z-lab's loaders read there (a
    save adds `rope_theta` beside them: DFlashDraftModel.checkpoint_fields). target_features False: the ablation
    that reads none (`dflash_config["target_features"]`, written only then)."""
    inherited = {k: v for k, v in target_config.to_dict().items()
                 if k not in ("architectures", "dtype", "torch_dtype", "transformers_version", "layer_types",
                              "num_hidden_layers")}
    config = Qwen3Config(**inherited, num_hidden_layers=layers)
    config.architectures = ["DFlashDraftModel"]
    config.dflash_config = {"target_layer_ids": evenly_spaced_layers(target_config.num_hidden_layers),
                            "block_size": block_size, "mask_token_id": mask_token_id}
    if not target_features:
        config.dflash_config["target_features"] = False
    config.block_size = block_size
    config.num_target_layers = target_config.num_hidden_layers
    return config


def init_from_target(drafter: DFlashDraftModel, target) -> None:
    """Start the draft layers from the target's top layers (same shapes), the final norm likewise: the
    drafter's output already lives in the space the target's LM head reads."""
    target_layers = target.model.layers[-len(drafter.layers):]
    for draft_layer, target_layer in zip(drafter.layers, target_layers):
        draft_layer.load_state_dict(target_layer.state_dict(), strict=False)
    drafter.norm.load_state_dict(target.model.norm.state_dict())


def sample_anchors(batch: int, seq_len: int, block_size: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """(batch, count) distinct anchor positions with at least one context position before each and the
    whole block inside the window."""
    low, high = 1, seq_len - block_size
    scores = torch.rand(batch, high - low + 1, generator=generator)
    return scores.topk(count, dim=1).indices.sort(dim=1).values + low


def block_attention_mask(anchors: torch.Tensor, seq_len: int, block_size: int) -> torch.Tensor:
    """(batch, 1, count·B, seq_len + count·B) bool: block m sees context before its anchor and its own block."""
    batch, count = anchors.shape
    block_of_query = torch.arange(count, device=anchors.device).repeat_interleave(block_size)  # (Q,)
    context = torch.arange(seq_len, device=anchors.device)[None, None, :] < anchors[:, block_of_query][:, :, None]
    own_block = (block_of_query[:, None] == block_of_query[None, :]).expand(batch, -1, -1)  # (b, Q, Q)
    return torch.cat([context, own_block], dim=2)[:, None]


def soft_cross_entropy(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
    """−Σ_v p_teacher(v) log p_student(v) at every position (all dimensions but the last kept)."""
    return -(teacher_logits.softmax(-1) * F.log_softmax(student_logits, dim=-1)).sum(-1)


def argmax_cross_entropy(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
    """−log p_student(argmax p_teacher) at every position: only the teacher's greedy choice counts, which is
    all that decides acceptance at temperature 0."""
    return -F.log_softmax(student_logits, dim=-1).gather(-1, teacher_logits.argmax(-1, keepdim=True)).squeeze(-1)


def distribution_divergence(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
    """KL(p_teacher ‖ p_student) + TV(p_teacher, p_student) at every position. Above temperature 0 a draft
    x ~ q passes with probability min(1, p(x)/q(x)), whose mean is 1 − TV: TV is what acceptance pays for, and
    the KL term gives every token of the distribution a gradient (TV's is zero wherever q already exceeds p)."""
    log_p = F.log_softmax(teacher_logits, dim=-1)
    log_q = F.log_softmax(student_logits, dim=-1)
    p = log_p.exp()
    kl = (p * (log_p - log_q)).sum(-1)
    return kl + 0.5 * (p - log_q.exp()).abs().sum(-1)


TV_MIX = {"ce": 0.1, "tv": 0.9}  # the DSpark paper's drafter loss: a little cross-entropy, mostly total variation


def argmax_ce_and_tv(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """−log p_student(argmax p_teacher) and TV(p_teacher, p_student) at every position: the two terms of the DSpark
    paper's drafter loss (tv_mix; DSpark's own loss also trains its confidence head toward 1 − TV)."""
    log_q = F.log_softmax(student_logits, dim=-1)
    p = teacher_logits.softmax(-1)
    ce = -log_q.gather(-1, p.argmax(-1, keepdim=True)).squeeze(-1)
    tv = 0.5 * (log_q.exp() - p).abs().sum(-1)
    return ce, tv


def tv_mix(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
    """0.1 × −log p_student(argmax p_teacher) + 0.9 × TV(p_teacher, p_student) at every position: the DSpark paper's
    drafter loss (without its confidence head), one objective for both regimes. TV is what acceptance pays for above
    temperature 0 (1 − TV is the rejection rule's passing chance); the argmax term, and TV itself where the target
    is sure, hold the target's greedy choice, which decides acceptance at 0."""
    ce, tv = argmax_ce_and_tv(teacher_logits, student_logits)
    return TV_MIX["ce"] * ce + TV_MIX["tv"] * tv


LABELS = {"soft": soft_cross_entropy, "argmax": argmax_cross_entropy, "distribution": distribution_divergence,
          "tv": tv_mix}


def gamma_for(block_size: int) -> float:
    """The paper's decay γ for a block size: its own value at 8, 10 and 16, straight lines between them, and
    the nearest end's value outside (4 below 8, 7 above 16)."""
    sizes = sorted(PAPER_GAMMA)
    if block_size <= sizes[0] or block_size >= sizes[-1]:
        return PAPER_GAMMA[sizes[0] if block_size <= sizes[0] else sizes[-1]]
    low = max(s for s in sizes if s <= block_size)
    high = min(s for s in sizes if s >= block_size)
    if low == high:
        return PAPER_GAMMA[low]
    share = (block_size - low) / (high - low)
    return PAPER_GAMMA[low] + share * (PAPER_GAMMA[high] - PAPER_GAMMA[low])


def position_weights(block_size: int, gamma: float | None = None) -> torch.Tensor:
    """w_k = exp(−(k−1)/γ) for drafted positions k = 1..B−1; γ by default the paper's for this block size."""
    gamma = gamma_for(block_size) if gamma is None else gamma
    return torch.tensor([math.exp(-(k - 1) / gamma) for k in range(1, block_size)])


def written_labels(teacher_logits: torch.Tensor, x: torch.Tensor, written_from: int) -> torch.Tensor:
    """The teacher's logits (b, t, V) with the prediction of every token x[p] at p ≥ written_from replaced by a
    one-hot of that token: on rows the target continued from a written_from-token prefix, the label of each
    token it wrote is that token itself (its greedy choice in a greedy row, its draw at temperature 1 in a
    sampled one: self-distillation on its own outputs); prefix tokens keep the target's own prediction."""
    if written_from >= x.shape[1]:
        return teacher_logits
    labels = torch.zeros_like(teacher_logits[:, written_from - 1: -1])
    labels.scatter_(-1, x[:, written_from:, None].long(), 1.0)
    return torch.cat([teacher_logits[:, : written_from - 1], labels, teacher_logits[:, -1:]], dim=1)


def block_batch(drafter: DFlashDraftModel, target, x: torch.Tensor, generator: torch.Generator,
                anchors_per_window: int = ANCHORS_PER_WINDOW, anchor_predicts_first: bool = False,
                written_from: int | None = None, kept: RowTeacher | None = None):
    """One teacher-forced batch of blocks cut from the windows `x` (b, t) at random anchors.

    Returns, for every predicted token of every block (b, M, n): the drafter's final hidden states
    (b, M, n, H), the target's logits for that token (b, M, n, V) and the token just before it (b, M, n).
    DFlash predicts n = B − 1 tokens from the mask positions; DSpark (anchor_predicts_first) predicts
    n = B tokens, the anchor's own state predicting the first. `written_from`: the teacher's logits as
    `written_labels` makes them (labels of the tokens the target wrote past that position). `kept`: the
    target's outputs kept per row (rows drawn again and again), else the target runs on `x`."""
    b, t = x.shape
    bs = drafter.block_size
    device = x.device
    features, teacher_logits = (kept(x) if kept is not None
                                else target_outputs(target, x, tuple(drafter.target_layer_ids)))
    if written_from is not None:
        teacher_logits = written_labels(teacher_logits, x, written_from)
    reach = bs + 1 if anchor_predicts_first else bs  # the last predicted token must lie inside the window
    anchors = sample_anchors(b, t, reach, anchors_per_window, generator).to(device)  # (b, M), drawn on the CPU
    offsets = torch.arange(bs, device=device)
    block_positions = (anchors[:, :, None] + offsets).reshape(b, -1)  # (b, M·B)
    block_ids = torch.full_like(block_positions, drafter.mask_token_id)
    block_ids[:, ::bs] = x.gather(1, anchors)
    with torch.no_grad():
        noise = target.get_input_embeddings()(block_ids)
    position_ids = torch.cat([torch.arange(t, device=device).expand(b, -1), block_positions], dim=1)
    mask = block_attention_mask(anchors, t, bs)
    if not drafter.target_features:  # the ablation: each block sees its own positions only
        features, position_ids, mask = None, block_positions, mask[..., t:]
    hidden = drafter(noise, features, position_ids, attention_mask=mask).view(b, -1, bs, noise.shape[-1])
    if not anchor_predicts_first:
        hidden = hidden[:, :, 1:]  # mask positions predict the token that stands there
    n = hidden.shape[2]
    predicted = anchors[:, :, None] + torch.arange(1, n + 1, device=device)  # positions predicted (b, M, n)
    batch_index = torch.arange(b, device=device)[:, None, None]
    teacher = teacher_logits[batch_index, predicted - 1]  # the target predicts token p from position p − 1
    prev_ids = x[batch_index, predicted - 1]
    return hidden, teacher, prev_ids


def dflash_batch(drafter: DFlashDraftModel, target, x: torch.Tensor, generator: torch.Generator,
                 anchors_per_window: int = ANCHORS_PER_WINDOW, written_from: int | None = None,
                 kept: RowTeacher | None = None):
    """Draft logits at every drafted block position (b, M, B − 1, V) and the target's logits there."""
    hidden, teacher, _ = block_batch(drafter, target, x, generator, anchors_per_window, written_from=written_from,
                                     kept=kept)
    return target.get_output_embeddings()(hidden).float(), teacher


def dflash_loss(drafter: DFlashDraftModel, target, generator: torch.Generator,
                labels: str = "soft", rows: bool | torch.Tensor = False
                ) -> Callable[[torch.Tensor], torch.Tensor]:
    """Position-weighted loss of the drafted positions against the target: "soft", cross-entropy against its
    whole distribution (distillation); "argmax", against its greedy choice, which on text the target wrote
    greedily is the next token itself (the DFlash paper's loss on target-generated responses); "distribution",
    KL + TV against its distribution at temperature 1 (the checkpoint used above temperature 0); "tv", the DSpark
    paper's mix of CE on its argmax and TV against its distribution (tv_mix: one set of weights for every
    temperature); "written", on
    rows the target continued from a PREFIX_TOKENS-token prefix, cross-entropy against the token it wrote (the
    DFlash paper's loss on target-generated responses, at either temperature: written_labels). Position k
    weighted exp(−(k−1)/γ), γ the paper's for the drafter's block size (gamma_for). rows: the target's outputs
    kept per row (teacher.row_teacher: True every window, a tensor of rows those rows only)."""
    if labels not in LABELS and labels != "written":
        raise ValueError(f"labels must be one of {', '.join([*LABELS, 'written'])}, not {labels!r}")
    weights = position_weights(drafter.block_size)
    divergence = LABELS["argmax" if labels == "written" else labels]
    written_from = PREFIX_TOKENS if labels == "written" else None
    kept = row_teacher(target, drafter.target_layer_ids, rows)

    def loss(x: torch.Tensor) -> torch.Tensor:
        draft_logits, teacher_logits = dflash_batch(drafter, target, x, generator, written_from=written_from,
                                                    kept=kept)
        ce = divergence(teacher_logits, draft_logits)  # (b, M, B−1)
        w = weights.to(ce.device)
        return (ce * w).sum(-1).mean() / w.sum()

    return loss


@torch.no_grad()
def dflash_acceptance(drafter: DFlashDraftModel, target, windows: torch.Tensor) -> float:
    """Held-out proxy for τ − 1 at temperature 0: expected accepted length of a block when each drafted
    position is right if its argmax equals the target's (computed on teacher-forced context)."""
    generator = torch.Generator().manual_seed(0)
    draft_logits, teacher_logits = dflash_batch(drafter, target, windows[:16], generator)
    correct = (draft_logits.argmax(-1) == teacher_logits.argmax(-1)).int()
    return correct.cumprod(-1).sum(-1).float().mean().item()
