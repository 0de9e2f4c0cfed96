"""Text the target writes itself, for training drafters on what they will actually be asked to predict.

Speculative decoding drafts continuations of the target's own output, which differ from human-written
text (at temperature 0 a small target repeats itself a lot). Two sets, both deterministic given the seed:

- `generate_rows` (runs/selfdata.pt): random corpus prefixes continued by the shipped target, half of the
  batches greedily, half sampled at temperature 1. Mixed into the drafters' first phases.
- `generate_greedy_rows` (runs/greedy.pt): greedy continuations only, three quarters of them after a line that
  opens a function (the shape of the app's prompts and of the held-out set, cut from training files), a quarter
  after random corpus windows. At temperature 0 every drafted token is judged against exactly these choices; the
  drafters' last phase learns from them alone.
- `generate_sampled_rows` (runs/sampled.pt): the same kinds of prefixes, continued by sampling at temperature 1:
  the text a sampled run drafts for, which the drafters' distribution phase (the checkpoints used above
  temperature 0) learns from.
"""

from __future__ import annotations

import random
import time

import torch

from ..models import forward_logits, new_cache
from .corpus import corpus_files, read_text
from .lm import sample_windows
from .prompts import DEF_LINE, PROMPT_CHARS

PREFIX_TOKENS = 64
NEW_TOKENS = 192
BATCH = 32
DEF_SHARE = 0.75  # of the greedy rows, those after a function opening (1000 steps on such rows only: DFlash τ 3.55
# on the held-out prompts; 2000 steps on half such rows, half random windows: 3.52; docs/experiments.md)


@torch.inference_mode()
def continue_rows(target, prefixes: torch.Tensor, greedy: bool, generator: torch.Generator) -> torch.Tensor:
    """(n, PREFIX_TOKENS + NEW_TOKENS) on the CPU: `prefixes` (n, PREFIX_TOKENS) continued by the target,
    greedily or sampled at temperature 1 (draws from `generator`, on the CPU: the same rows on any device)."""
    device = next(target.parameters()).device
    ids = prefixes.to(device)
    cache = new_cache(target)
    logits = forward_logits(target, ids, cache, logits_to_keep=1)[:, -1]
    for _ in range(NEW_TOKENS):
        if greedy:
            next_ids = logits.argmax(-1, keepdim=True)
        else:
            next_ids = torch.multinomial(torch.softmax(logits.float(), -1).cpu(), 1, generator=generator).to(device)
        ids = torch.cat([ids, next_ids], dim=1)
        logits = forward_logits(target, next_ids, cache, logits_to_keep=1)[:, -1]
    return ids.cpu()


def generate_rows(target, stream: torch.Tensor, num_rows: int, seed: int = 0, log=print) -> torch.Tensor:
    """(num_rows, PREFIX_TOKENS + NEW_TOKENS) token ids: corpus prefixes continued by the target, batches
    alternately greedy and sampled."""
    generator = torch.Generator().manual_seed(seed)
    rows, start = [], time.perf_counter()
    for batch_index in range(0, num_rows, BATCH):
        prefixes = sample_windows(stream, BATCH, PREFIX_TOKENS, generator)
        rows.append(continue_rows(target, prefixes, (batch_index // BATCH) % 2 == 0, generator))
        log(f"self-data: {batch_index + BATCH}/{num_rows} rows, {time.perf_counter() - start:.0f} s")
    return torch.cat(rows)[:num_rows]


def def_line_prefixes(tokenizer, count: int, seed: int) -> torch.Tensor:
    """(count, PREFIX_TOKENS): the last PREFIX_TOKENS tokens of training-file text ending at a line that opens
    a function, cut as the held-out prompts are (train/prompts.py) but from files the models train on."""
    ends = []
    for f in corpus_files():
        if not f.heldout:
            ends += [(f, m.end()) for m in DEF_LINE.finditer(read_text(f)) if m.start() > PROMPT_CHARS]
    random.Random(seed).shuffle(ends)
    prefixes, texts = [], {}
    for f, end in ends:
        if len(prefixes) == count:
            break
        text = texts.setdefault(f.relative_path, read_text(f))
        ids = tokenizer.encode(text[text.rfind("\n", 0, end - PROMPT_CHARS) + 1: end])
        if len(ids) >= PREFIX_TOKENS:
            prefixes.append(ids[-PREFIX_TOKENS:])
    if len(prefixes) < count:
        raise ValueError(f"the training files have only {len(prefixes)} function openings, asked for {count}")
    return torch.tensor(prefixes)


def greedy_continuations(target, prefixes: torch.Tensor, log=lambda line: None) -> torch.Tensor:
    """(n, PREFIX_TOKENS + NEW_TOKENS): every row of `prefixes` continued greedily, BATCH rows at a time."""
    rows, start = [], time.perf_counter()
    for first in range(0, len(prefixes), BATCH):
        rows.append(continue_rows(target, prefixes[first: first + BATCH], True, torch.Generator()))
        log(f"greedy-data: {first + len(rows[-1])}/{len(prefixes)} rows, {time.perf_counter() - start:.0f} s")
    return torch.cat(rows)


def _prompt_like_prefixes(tokenizer, stream: torch.Tensor, num_rows: int, generator: torch.Generator,
                          seed: int) -> torch.Tensor:
    """(num_rows, PREFIX_TOKENS): the first DEF_SHARE after function openings, the rest random windows."""
    num_defs = round(num_rows * DEF_SHARE)
    return torch.cat([def_line_prefixes(tokenizer, num_defs, seed),
                      sample_windows(stream, num_rows - num_defs, PREFIX_TOKENS, generator)])


def generate_greedy_rows(target, tokenizer, stream: torch.Tensor, num_rows: int, seed: int = 0,
                         log=print) -> torch.Tensor:
    """(num_rows, PREFIX_TOKENS + NEW_TOKENS): greedy continuations, the first DEF_SHARE of them after function
    openings, the rest after random windows of `stream`."""
    generator = torch.Generator().manual_seed(seed)
    return greedy_continuations(target, _prompt_like_prefixes(tokenizer, stream, num_rows, generator, seed), log)


def generate_sampled_rows(target, tokenizer, stream: torch.Tensor, num_rows: int, seed: int = 0,
                          log=print) -> torch.Tensor:
    """(num_rows, PREFIX_TOKENS + NEW_TOKENS): the prefixes of generate_greedy_rows, continued by sampling at
    temperature 1 (every draw from one seeded generator on the CPU: the same rows on any device)."""
    generator = torch.Generator().manual_seed(seed)
    prefixes = _prompt_like_prefixes(tokenizer, stream, num_rows, generator, seed)
    rows, start = [], time.perf_counter()
    for first in range(0, len(prefixes), BATCH):
        rows.append(continue_rows(target, prefixes[first: first + BATCH], False, generator))
        log(f"sampled-data: {first + len(rows[-1])}/{len(prefixes)} rows, {time.perf_counter() - start:.0f} s")
    return torch.cat(rows)
