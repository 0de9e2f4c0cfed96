"""The public prompt sets: code from standard-library modules no model was trained on.

Each prompt is the text of a held-out module up to the end of a line that opens a function (`def ...:`,
without its newline), with up to PROMPT_CHARS of preceding code as context, cut at a line start. Deterministic:
the same Python gives the same prompts.

Two sets from the same modules, at different functions: the held-out set (assets/prompts/heldout.jsonl), which
the model card, the benchmarks and every choice of recipe were measured on, and the validation set
(assets/prompts/validation.jsonl), which no choice was made on: it checks that a figure does not hold on the
held-out prompts alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .corpus import corpus_files, read_text

PROMPT_CHARS = 600
# Which function openings of a module become prompts: the defs at these fractions of its list.
HELDOUT_PICKS = ((1, 3), (2, 3))
VALIDATION_PICKS = ((1, 6), (3, 6), (5, 6))
DEF_LINE = re.compile(r"^[ \t]*def \w+\(.*\):[ \t]*$", re.MULTILINE)


def _prompts_at(picks: tuple[tuple[int, int], ...]) -> list[dict]:
    prompts = []
    for f in corpus_files():
        if not f.heldout:
            continue
        text = read_text(f)
        matches = [m for m in DEF_LINE.finditer(text) if m.start() > PROMPT_CHARS]
        if not matches:
            continue
        # Spread the picks over the module.
        ends = sorted({matches[len(matches) * numerator // denominator].end() for numerator, denominator in picks})
        for end in ends:
            start = text.rfind("\n", 0, end - PROMPT_CHARS) + 1
            # No trailing newline: the tokenizer merges a newline with the next line's indentation, so a
            # prompt ending in a bare newline would be a token boundary the model never saw in training.
            prompts.append({"source": f.relative_path, "prompt": text[start:end]})
    return prompts


def heldout_prompts() -> list[dict]:
    return _prompts_at(HELDOUT_PICKS)


def validation_prompts() -> list[dict]:
    """Other functions of the same modules; none that is also a held-out prompt."""
    heldout = {p["prompt"] for p in heldout_prompts()}
    return [p for p in _prompts_at(VALIDATION_PICKS) if p["prompt"] not in heldout]


def write_prompts(path: Path, prompts: list[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), encoding="utf-8")
    return len(prompts)
