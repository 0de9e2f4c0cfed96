"""Resumable training loops for the embedded language models (target and the small LM drafter).

The target learns next-token prediction on the corpus. The small LM drafter is distilled from the shipped
target: it learns to match the target's full next-token distribution (KL at temperature 1) on the same
text, so that it agrees with the target rather than with the corpus.

Runs are deterministic given the seed and resume from `ckpt.pt` in the run folder, so a cut run
loses at most `save_every` steps.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import Qwen3ForCausalLM

from .corpus import corpus_files, read_text
from .teacher import row_teacher, target_outputs


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1600  # optimizer steps in the whole run (the schedule depends on it)
    batch_size: int = 8  # windows per step
    seq_len: int = 512  # tokens per window
    lr: float = 2e-3  # peak learning rate after warm-up
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1  # cosine decays to this share of the peak
    weight_decay: float = 0.1
    seed: int = 0
    save_every: int = 50  # steps between checkpoints
    eval_every: int = 200
    threads: int = 2
    device: str = "cpu"  # where the model trains ("cuda": the whole family in minutes on one GPU)
    self_data_fraction: float = 0.0  # share of each batch taken from text the target wrote (selfdata.py)
    # Forward passes in bfloat16 autocast (weights, gradients and optimizer stay float32): half the step time
    # on a CPU with AVX-512 BF16 or AMX, and on any GPU. "fp32" trains in float32 throughout.
    precision: str = "bf16"


def native_precision(device: str) -> str:
    """The precision a training on `device` runs fastest in: "bf16" on a GPU, and on a CPU whose oneDNN computes
    bfloat16 natively (AVX-512 BF16 or AMX); "fp32" on any other CPU, where bfloat16 autocast is emulated and costs
    several times float32's step (docs/embedded-models.md)."""
    if device.split(":")[0] != "cpu":  # a device named wrong is refused where the models move there
        return "bf16"
    return "bf16" if cpu_computes_bf16() else "fp32"


def cpu_computes_bf16() -> bool:
    """Whether this CPU's oneDNN has native bfloat16 kernels (AVX-512 BF16 or AMX)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def tokenize_corpus(tokenizer, cache_path: Path) -> dict[str, torch.Tensor]:
    """Token streams of the train and held-out splits, files joined by end-of-text, cached on disk."""
    if cache_path.exists():
        return torch.load(cache_path)
    eos = tokenizer.eos_token_id
    streams: dict[str, list[int]] = {"train": [], "heldout": []}
    for f in corpus_files():
        streams["heldout" if f.heldout else "train"] += tokenizer.encode(read_text(f)) + [eos]
    tensors = {k: torch.tensor(v, dtype=torch.int16 if len(tokenizer) < 32768 else torch.int32) for k, v in streams.items()}
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(tensors, cache_path)
    return tensors


def sample_windows(stream: torch.Tensor, batch_size: int, seq_len: int, generator: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - seq_len, (batch_size,), generator=generator)
    return torch.stack([stream[s : s + seq_len] for s in starts.tolist()]).long()


def sample_batch(streams: dict[str, torch.Tensor], cfg: TrainConfig, generator: torch.Generator) -> torch.Tensor:
    """Corpus windows, and with cfg.self_data_fraction > 0 rows of target-written text (streams["self"])."""
    num_self = round(cfg.batch_size * cfg.self_data_fraction)
    parts = []
    if num_self < cfg.batch_size:
        parts.append(sample_windows(streams["train"], cfg.batch_size - num_self, cfg.seq_len, generator))
    if num_self:
        rows = streams["self"]
        parts.append(rows[torch.randint(0, len(rows), (num_self,), generator=generator), : cfg.seq_len].long())
    return torch.cat(parts)


def heldout_windows(stream: torch.Tensor, seq_len: int, max_windows: int = 64) -> torch.Tensor:
    """Fixed, non-overlapping held-out windows: the same for every model, so losses compare."""
    n = min(max_windows, len(stream) // seq_len)
    return stream[: n * seq_len].view(n, seq_len).long()


@torch.no_grad()
def heldout_loss(model, windows: torch.Tensor, batch_size: int = 8) -> float:
    """Mean next-token cross-entropy (nats) over the held-out windows."""
    total, count = 0.0, 0
    device = next(model.parameters()).device
    for i in range(0, len(windows), batch_size):
        x = windows[i : i + batch_size].to(device)
        logits = model(x).logits[:, :-1].float()
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), reduction="sum").item()
        count += x[:, 1:].numel()
    return total / count


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) per token, at temperature 1."""
    teacher_logprobs = F.log_softmax(teacher_logits.float(), dim=-1)
    student_logprobs = F.log_softmax(student_logits.float(), dim=-1)
    return F.kl_div(student_logprobs, teacher_logprobs, log_target=True, reduction="batchmean") / student_logits.size(1)


def lm_loss(model: Qwen3ForCausalLM) -> Callable[[torch.Tensor], torch.Tensor]:
    """Next-token cross-entropy on the corpus windows."""
    return lambda x: model(x, labels=x).loss


def distill_loss(student: Qwen3ForCausalLM, teacher: Qwen3ForCausalLM, rows: bool | torch.Tensor = False
                 ) -> Callable[[torch.Tensor], torch.Tensor]:
    """Match the teacher's next-token distribution at every position of the window. rows: the teacher's outputs
    kept per row (teacher.row_teacher: True every window, a tensor of rows those rows only)."""
    teacher.eval()
    kept = row_teacher(teacher, (), rows)

    def loss(x: torch.Tensor) -> torch.Tensor:
        _, teacher_logits = target_outputs(teacher, x) if kept is None else kept(x)
        return distillation_loss(student(x).logits, teacher_logits)

    return loss


def train(
    model: torch.nn.Module,
    streams: dict[str, torch.Tensor],
    run_dir: Path,
    cfg: TrainConfig,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    eval_fn: Callable[[torch.Tensor], float],
    loss_generators: Sequence[torch.Generator] = (),
) -> torch.nn.Module:
    """Train `model` on random corpus windows with `loss_fn`, resuming from run_dir/ckpt.pt; `eval_fn`
    scores the fixed held-out windows every cfg.eval_every steps. Batches are drawn on the CPU (the same
    ones whatever the device) and moved to cfg.device, where the model (and loss_fn's target) must live.
    `loss_generators`: the generators loss_fn draws from (a drafter's anchor positions); their states are
    checkpointed with the batches' own, so a run cut and resumed trains exactly as one never cut."""
    if cfg.precision not in ("bf16", "fp32"):
        raise ValueError(f"precision must be bf16 or fp32, not {cfg.precision!r}")
    torch.set_num_threads(cfg.threads)
    run_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device(cfg.device)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    generator = torch.Generator().manual_seed(cfg.seed)
    step, elapsed_s = 0, 0.0
    ckpt_path = run_dir / "ckpt.pt"
    if ckpt_path.exists():
        state = torch.load(ckpt_path, weights_only=False, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        for g, g_state in zip(loss_generators, state.get("loss_generators", ())):  # absent in older checkpoints
            g.set_state(g_state)
        step, elapsed_s = state["step"], state["elapsed_s"]
        print(f"resumed at step {step} ({elapsed_s / 60:.1f} min trained)", flush=True)
    log = (run_dir / "log.jsonl").open("a")
    eval_windows = heldout_windows(streams["heldout"], cfg.seq_len).to(device)
    model.train()
    t_last = time.perf_counter()
    while step < cfg.steps:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        x = sample_batch(streams, cfg, generator).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"):
            loss = loss_fn(x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        now = time.perf_counter()
        elapsed_s += now - t_last
        t_last = now
        record = {"step": step, "loss": round(loss.item(), 4), "lr": round(lr_at(step - 1, cfg), 6), "min": round(elapsed_s / 60, 2)}
        if step % cfg.eval_every == 0 or step == cfg.steps:
            model.eval()
            record["heldout"] = round(eval_fn(eval_windows), 4)
            model.train()
        if step % 10 == 0 or "heldout" in record:
            print(json.dumps(record), flush=True)
            log.write(json.dumps(record) + "\n")
            log.flush()
        if step % cfg.save_every == 0 or step == cfg.steps:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                     "loss_generators": [g.get_state() for g in loss_generators],
                     "step": step, "elapsed_s": elapsed_s, "config": asdict(cfg)}
            torch.save(state, run_dir / "ckpt.tmp")
            (run_dir / "ckpt.tmp").replace(ckpt_path)  # atomic: a cut never leaves half a checkpoint
            t_last = time.perf_counter()
    return model
