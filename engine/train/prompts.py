"""The public held-out prompt set: code from standard-library modules no model was trained on.

Each prompt is the text of a held-out module up to the end of a line that opens a function (`def ...:`,
without its newline), with up to PROMPT_CHARS of preceding code as context, cut at a line start. Deterministic:
the same Python gives the same prompts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .corpus import corpus_files, read_text

PROMPT_CHARS = 600
PROMPTS_PER_MODULE = 2
DEF_LINE = re.compile(r"^[ \t]*def \w+\(.*\):[ \t]*$", re.MULTILINE)


def heldout_prompts() -> list[dict]:
    prompts = []
    for f in corpus_files():
        if not f.heldout:
            continue
        text = read_text(f)
        matches = [m for m in DEF_LINE.finditer(text) if m.start() > PROMPT_CHARS]
        if not matches:
            continue
        # Spread the picks over the module: the defs at 1/3 and 2/3 of its list.
        picks = sorted({matches[len(matches) * (i + 1) // (PROMPTS_PER_MODULE + 1)].end()
                        for i in range(PROMPTS_PER_MODULE)})
        for end in picks:
            start = text.rfind("\n", 0, end - PROMPT_CHARS) + 1
            # No trailing newline: the tokenizer merges a newline with the next line's indentation, so a
            # prompt ending in a bare newline would be a token boundary the model never saw in training.
            prompts.append({"source": f.relative_path, "prompt": text[start:end]})
    return prompts


def write_prompts(path: Path) -> int:
    prompts = heldout_prompts()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), encoding="utf-8")
    return len(prompts)
