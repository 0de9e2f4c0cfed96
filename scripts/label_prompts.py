"""Label each held-out prompt with the kind of text its continuation is: `python -m scripts.label_prompts [--check]`.

The kind is read from what the target itself writes after the prompt (its greedy continuation, CONTINUATION_TOKENS
new tokens, the length every benchmark measures), by a rule applied in this order:

1. "prose-like": at least half of the continuation's non-blank characters lie in comments or string literals
   (docstrings, messages).
2. "regular code": templated code that other modules write too. Each code line of the continuation is masked
   (string literals become S, numbers N, comments and blank space dropped; a line holding only a string is not
   code); at least half of its distinct masked lines also occur in the continuation of a prompt from another
   module (codecs' getregentry and decode methods, their StreamReader and StreamWriter classes).
3. "free code": everything else, ordinary logic whose continuation has real choices.

Writes the label as a "kind" field into assets/prompts/heldout.jsonl, keeping every other field and the row order;
`--check` writes nothing and fails when a stored label differs from the rule's. The rule and its counts:
docs/embedded-models.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter

from engine.contract.presets import HELDOUT_PROMPTS
from engine.measure.decide import read_prompt_file

KINDS = ("regular code", "free code", "prose-like")
CONTINUATION_TOKENS = 64
SHARED_LINES = 0.5  # the share of masked lines another module's continuation also writes, for "regular code"
PROSE_CHARS = 0.5  # the share of characters in comments and strings, for "prose-like"

NUMBER = re.compile(r"\b\d[\w.]*")
# Comments and string literals, scanned left to right (a quote in a comment, a # in a string, stay inside).
PROSE = re.compile(r"#[^\n]*|'''.*?(?:'''|\Z)|\"\"\".*?(?:\"\"\"|\Z)|'(?:\\.|[^'\\\n])*(?:'|$)"
                   r"|\"(?:\\.|[^\"\\\n])*(?:\"|$)", re.DOTALL | re.MULTILINE)


def prose_share(code: str) -> float:
    """The share of `code`'s non-blank characters that lie in comments or string literals (one left open at the end
    counts to its end)."""
    inside = sum(len(re.sub(r"\s", "", m.group())) for m in PROSE.finditer(code))
    solid = len(re.sub(r"\s", "", code))
    return inside / solid if solid else 0.0


def masked_lines(code: str) -> list[str]:
    """The lines of `code` that hold code, masked: string literals as S, comments dropped, numbers as N, no blank
    space; a line left empty or holding only a string (a docstring's) is not code."""
    masked = NUMBER.sub("N", PROSE.sub(lambda m: "" if m.group().startswith("#") else "S", code))
    lines = [re.sub(r"\s+", "", line) for line in masked.splitlines()]
    return [line for line in lines if line and line != "S"]


def label(rows: list[dict], continuations: list[str]) -> list[str]:
    """Each row's kind by the rule above, from its continuation and the other modules' continuations."""
    lines = [set(masked_lines(c)) for c in continuations]
    kinds = []
    for i, (row, own) in enumerate(zip(rows, lines)):
        others = {line for j, other in enumerate(lines) if rows[j]["source"] != row["source"] for line in other}
        if prose_share(continuations[i]) >= PROSE_CHARS:
            kinds.append("prose-like")
        elif own and sum(line in others for line in own) >= SHARED_LINES * len(own):
            kinds.append("regular code")
        else:
            kinds.append("free code")
    return kinds


def continuations(prompts: list[str]) -> list[str]:
    """The target's greedy continuation of each prompt, CONTINUATION_TOKENS new tokens."""
    from engine.contract.types import GenerationConfig
    from engine.loop import Engine

    engine = Engine.load("tiny")
    config = GenerationConfig(method="baseline", max_new_tokens=CONTINUATION_TOKENS)
    texts = []
    for i, prompt in enumerate(prompts):
        texts.append(engine.generate(prompt, config).text)
        print(f"\rcontinuations: {i + 1}/{len(prompts)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.label_prompts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; fail if a stored label differs")
    args = parser.parse_args(argv)
    rows = read_prompt_file(HELDOUT_PROMPTS)
    kinds = label(rows, continuations([r["prompt"] for r in rows]))
    if args.check:
        wrong = [i for i, (r, k) in enumerate(zip(rows, kinds)) if r.get("kind") != k]
        print(f"{len(rows) - len(wrong)} of {len(rows)} stored labels agree with the rule"
              + (f"; rows {wrong} differ" if wrong else ""))
        return 1 if wrong else 0
    labelled = [{**{k: v for k, v in r.items() if k != "kind"}, "kind": kind} for r, kind in zip(rows, kinds)]
    HELDOUT_PROMPTS.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in labelled), encoding="utf-8")
    counts = Counter(kinds)
    print(f"{HELDOUT_PROMPTS}: " + ", ".join(f"{counts[k]} {k}" for k in KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
