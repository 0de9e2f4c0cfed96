"""Training the DSpark drafter on our frozen target, and calibrating its confidences.

Blocks come from corpus windows exactly as for DFlash (train/dflash.py), except the anchor's own state
predicts the first token. Per predicted token k, with p the target's distribution and q the drafter's
Markov-corrected one, q_k ∝ exp(U_k + B(x_{k−1}, ·)) (x_{k−1} teacher-forced):
    loss_k = 0.1 · CE(q_k, argmax p_k) + 0.9 · TV(q_k, p_k) + 1.0 · BCE(c_k, 1 − TV(q_k, p_k)),
weighted by exp(−(k−1)/γ) with γ = 4, where TV = ½‖q − p‖₁ and 1 − TV is the chance the rejection rule
accepts the token. The last phase, on the target's greedy continuations, weights CE 1 and TV 0 (the argmax
labels DFlash's greedy phase uses too), and the BCE's target is whether the drafted argmax is the target's: at
temperature 0 that, not 1 − TV, is the chance a token survives, and a head trained on 1 − TV was under-confident
by ~0.28 (survival ECE) on the target's greedy text, so its scheduler cut blocks the target would have taken.
Calibration then fits one temperature per block position (sequential temperature scaling) on the target's
greedy continuations of held-out windows, so that c_k matches the measured chance that token k survives at
temperature 0 given that tokens 1..k−1 did, on the kind of text it is judged on at temperature 0; expected
calibration error is reported before and after, and the temperatures are kept only if they lower it on the
half they were not fitted on.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import Qwen3Config

from ..drafters.dflash_model import evenly_spaced_layers
from ..drafters.dspark_model import ARCHITECTURE, DSparkDraftModel
from .dflash import ANCHORS_PER_WINDOW, DRAFT_LAYERS, TV_MIX, argmax_ce_and_tv, block_batch
from .teacher import RowTeacher, row_teacher

BLOCK_SIZE = 7  # γ: inputs per block = drafted tokens per step (DeepSpec's Qwen3 drafters use 7)
GAMMA = 4.0
MARKOV_RANK = 64
LOSS_WEIGHTS = {**TV_MIX, "bce": 1.0}  # the paper's mix (dflash.TV_MIX), and its confidence head's BCE
# The greedy phase (train/__main__.py) scores only the target's greedy choice, as DFlash's does: the CE term alone,
# and the confidence head learns whether the drafted argmax is the target's (what decides acceptance at T = 0).
ARGMAX_LOSS_WEIGHTS = {"ce": 1.0, "tv": 0.0, "bce": 1.0}


def dspark_config(target_config: Qwen3Config, mask_token_id: int, block_size: int = BLOCK_SIZE,
                  layers: int = DRAFT_LAYERS, rank: int = MARKOV_RANK) -> Qwen3Config:
    """The target's config with DeepSpec's DSpark fields (its build_draft_config, our values): its architecture
    name, its tie flag (false: the drafter stores its own copy of the LM head, copy_target_embeddings)."""
    inherited = {k: v for k, v in target_config.to_dict().items()
                 if k not in ("architectures", "dtype", "torch_dtype", "transformers_version", "layer_types",
                              "num_hidden_layers", "tie_word_embeddings")}
    config = Qwen3Config(**inherited, num_hidden_layers=layers, tie_word_embeddings=False)
    config.update(dict(
        architectures=[ARCHITECTURE], block_size=block_size, mask_token_id=mask_token_id,
        target_layer_ids=evenly_spaced_layers(target_config.num_hidden_layers),
        num_target_layers=target_config.num_hidden_layers, num_anchors=ANCHORS_PER_WINDOW, markov_rank=rank,
        markov_head_type="vanilla", enable_confidence_head=True, confidence_head_with_markov=True))
    return config


def init_markov_head(drafter: DSparkDraftModel) -> None:
    """A neutral start: the bigram bias is zero until training shapes it."""
    with torch.no_grad():
        drafter.markov_head.markov_w1.weight.normal_(0.0, 1.0)
        drafter.markov_head.markov_w2.weight.zero_()


def _outputs(drafter: DSparkDraftModel, target, x: torch.Tensor, generator: torch.Generator,
             kept: RowTeacher | None = None):
    hidden, teacher, prev = block_batch(drafter, target, x, generator, anchor_predicts_first=True, kept=kept)
    logits = target.get_output_embeddings()(hidden).float() + drafter.markov_head.block_bias(prev, hidden).float()
    return hidden, logits, teacher, prev


def dspark_loss(drafter: DSparkDraftModel, target, generator: torch.Generator,
                labels: str = "paper", rows: bool | torch.Tensor = False
                ) -> Callable[[torch.Tensor], torch.Tensor]:
    """The paper's loss (LOSS_WEIGHTS), or with labels="argmax" ARGMAX_LOSS_WEIGHTS and the confidence head's
    BCE toward 1 when the drafted argmax equals the target's, else 0 (instead of toward 1 − TV). rows: the target's
    outputs kept per row (teacher.row_teacher: True every window, a tensor of rows those rows only)."""
    if labels not in ("paper", "argmax"):
        raise ValueError(f"labels must be paper or argmax, not {labels!r}")
    mix = LOSS_WEIGHTS if labels == "paper" else ARGMAX_LOSS_WEIGHTS
    weights = torch.tensor([math.exp(-(k - 1) / GAMMA) for k in range(1, drafter.block_size + 1)])
    kept = row_teacher(target, drafter.target_layer_ids, rows)

    def loss(x: torch.Tensor) -> torch.Tensor:
        hidden, logits, teacher, prev = _outputs(drafter, target, x, generator, kept)
        ce, tv = argmax_ce_and_tv(teacher, logits)
        conf_logits = drafter.confidence_logits(hidden, prev)
        survives = (1 - tv) if labels == "paper" else (logits.argmax(-1) == teacher.argmax(-1)).float()
        bce = F.binary_cross_entropy_with_logits(conf_logits, survives.detach(), reduction="none")
        per_token = mix["ce"] * ce + mix["tv"] * tv + mix["bce"] * bce
        w = weights.to(per_token.device)
        return (per_token * w).sum(-1).mean() / w.sum()

    return loss


@torch.no_grad()
def greedy_outcomes(drafter: DSparkDraftModel, target, windows: torch.Tensor, seed: int = 0):
    """Confidence logits (N, γ) and whether each drafted token equals the target's argmax (N, γ), on
    teacher-forced held-out blocks; on the CPU, wherever the models run."""
    hidden, logits, teacher, prev = _outputs(drafter, target, windows, torch.Generator().manual_seed(seed))
    conf_logits = drafter.confidence_logits(hidden, prev)
    correct = logits.argmax(-1) == teacher.argmax(-1)
    return conf_logits.reshape(-1, drafter.block_size).cpu(), correct.reshape(-1, drafter.block_size).cpu()


@torch.no_grad()
def sampled_outcomes(drafter: DSparkDraftModel, target, windows: torch.Tensor, seed: int = 0):
    """Confidence logits (N, γ) and whether each drafted token survived the rejection rule at temperature 1
    (N, γ): a token drafted from q passes with probability 1 − TV(q, p) given its context, so each outcome is a
    draw of that chance (seeded), on teacher-forced held-out blocks; on the CPU."""
    hidden, logits, teacher, prev = _outputs(drafter, target, windows, torch.Generator().manual_seed(seed))
    conf_logits = drafter.confidence_logits(hidden, prev)
    accept = 1 - 0.5 * (logits.softmax(-1) - teacher.softmax(-1)).abs().sum(-1)
    draws = torch.rand(accept.shape, generator=torch.Generator().manual_seed(seed + 1000)).to(accept.device)
    survived = draws < accept
    return conf_logits.reshape(-1, drafter.block_size).cpu(), survived.reshape(-1, drafter.block_size).cpu()


OUTCOMES = {"greedy": "token k equals the target's argmax, tokens 1..k−1 having matched (temperature 0)",
            "sampled": "token k passes the rejection rule at temperature 1 (a draw of 1 − TV), tokens 1..k−1 having "
                       "passed"}


def dspark_acceptance(drafter: DSparkDraftModel, target, windows: torch.Tensor) -> float:
    """Held-out proxy for τ − 1 at temperature 0: expected leading run of correct drafted tokens."""
    _, correct = greedy_outcomes(drafter, target, windows[:16])
    return correct.int().cumprod(-1).sum(-1).float().mean().item()


def fit_temperatures(conf_logits: torch.Tensor, correct: torch.Tensor) -> list[float]:
    """Sequential temperature scaling: for position k, over the blocks whose tokens 1..k−1 all survived,
    the temperature minimising the cross-entropy of σ(logit / t) against survival of token k."""
    grid = torch.logspace(-1.5, 1.5, 301)
    temperatures = []
    for k in range(conf_logits.shape[1]):
        reached = correct[:, :k].all(dim=1)
        logits, outcome = conf_logits[reached, k], correct[reached, k].float()
        if len(logits) < 20:  # too few blocks get this far to fit anything
            temperatures.append(temperatures[-1] if temperatures else 1.0)
            continue
        losses = torch.stack([F.binary_cross_entropy_with_logits(logits / t, outcome) for t in grid])
        temperatures.append(round(grid[losses.argmin()].item(), 4))
    return temperatures


def survival_ece(conf_logits: torch.Tensor, correct: torch.Tensor, temperatures: list[float], bins: int = 10) -> float:
    """Expected calibration error of the predicted survival ∏_{i≤k} c_i against "tokens 1..k all
    survived", over every block and position: Σ_bins (count / N) · |mean predicted − mean realised|."""
    t = torch.tensor(temperatures)
    predicted = torch.sigmoid(conf_logits / t).cumprod(dim=1).flatten()
    realised = correct.int().cumprod(dim=1).float().flatten()
    edges = torch.linspace(0, 1, bins + 1)
    error = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        in_bin = (predicted >= lo) & ((predicted < hi) | (hi == 1))
        if in_bin.any():
            error += in_bin.float().mean().item() * abs(predicted[in_bin].mean().item() - realised[in_bin].mean().item())
    return error


def calibrate(drafter: DSparkDraftModel, target, windows: torch.Tensor, what: str = "held-out windows",
              outcome: str = "greedy") -> dict:
    """Fit the per-position temperatures on half of `windows` (`what` they are, for the record), measure the
    survival ECE on the other half before and after, and store the temperatures in the drafter (and its config,
    for export) if they lower that error; otherwise temperatures of 1 (a head already calibrated stays as is).
    `outcome`: what survival means, "greedy" (temperature 0) or "sampled" (the rejection rule at temperature 1)."""
    meaning = OUTCOMES[outcome]
    outcomes = greedy_outcomes if outcome == "greedy" else sampled_outcomes  # looked up now: tests replace them
    half = len(windows) // 2
    fit_logits, fit_correct = outcomes(drafter, target, windows[:half], seed=1)
    test_logits, test_correct = outcomes(drafter, target, windows[half:], seed=2)
    fitted = fit_temperatures(fit_logits, fit_correct)
    identity = [1.0] * len(fitted)
    before = survival_ece(test_logits, test_correct, identity)
    after = survival_ece(test_logits, test_correct, fitted)
    temperatures = fitted if after < before else identity
    drafter.config.confidence_temperatures = temperatures
    drafter.confidence_temperatures = list(temperatures)
    return {"fitted_on": f"{half} of {len(windows)} rows: {what}", "measured_on": f"the other {len(windows) - half}",
            "outcome": meaning,
            "fitted_temperatures": fitted, "temperatures": temperatures,
            "survival_ece_before": round(before, 4), "survival_ece_with_fitted": round(after, 4),
            "survival_ece_after": round(min(before, after), 4)}
