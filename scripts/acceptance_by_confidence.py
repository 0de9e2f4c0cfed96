"""Where the drafters lose their tokens: every judged draft at temperature 0, beside how sure the target was there.

    .venv/bin/python -m scripts.acceptance_by_confidence --limit 24 --max-new-tokens 64 --drafts-per-step 7

For each held-out prompt the baseline writes its greedy output once, and one forward of the target over prompt and
output reads how sure it was of each output token: the probability its own distribution (temperature 1) gave its
argmax, the token greedy decoding wrote. Each drafting lane then runs the same prompt at K drafts a step; at
temperature 0 its output is the baseline's (checked: the script exits 1 where it is not), so each drafted token the
target judged, accepted or rejected, sits at a known output position and is counted in the bin of the target's
probability there. Tokens drafted after a rejection (never judged) and those DSpark's scheduler cut are not counted.

Printed: for each bin, the share of all output positions the target decoded there, and each lane's acceptance in it
with a Wilson interval; then the same for each kind of text, where the prompt file labels them (`kind`). Where every
lane accepts nearly all it drafts where the target is sure, and far fewer where it is not, what caps τ is how often
this target is unsure, which no drafter's capacity changes; where the lanes differ within a bin, the drafters do.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from engine.contract.methods import BASELINE, method
from engine.contract.presets import DEFAULT_PRESET, HELDOUT_PROMPTS, PRESETS
from engine.contract.types import EngineError, GenerationConfig
from engine.loop import Engine
from engine.measure.decide import position_rows, position_words, read_prompt_file

EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0 + 1e-9)  # the bins' edges: the target's probability of its argmax
JUDGED = ("accepted", "rejected")


def bin_of(value: float, edges=EDGES) -> int:
    """The index of the bin [edges[i], edges[i + 1]) that holds `value`."""
    return next(i for i in range(len(edges) - 1) if value < edges[i + 1])


def bin_label(i: int, edges=EDGES) -> str:
    low, high = edges[i], edges[i + 1]
    return f"p ≥ {low:g}" if high > 1 else f"{low:g} ≤ p < {high:g}"


@torch.inference_mode()
def argmax_probability(engine, prompt_ids, output_ids) -> list[float]:
    """The probability the target gave its argmax before each output token (temperature 1), in one forward."""
    ids = torch.tensor([list(prompt_ids) + list(output_ids)], device=engine.device)
    logits = engine.target(ids).logits[0, len(prompt_ids) - 1: -1].float()
    return torch.softmax(logits, dim=-1).amax(-1).tolist()


def judged_positions(result) -> list[tuple[int, int, bool]]:
    """(output position, token id, accepted) of every drafted token the target judged, over the run's decode steps.
    A step's drafts follow the tokens committed before it: a chain's i-th draft stands at that position + i. The
    first output token comes from the prefill, whether or not the run lists it as a step of its own."""
    out, position = [], len(result.output_ids) - sum(len(step.committed) for step in result.steps)
    for step in result.steps:
        if step.kind == "decode":
            out += [(position + i, token.id, token.verdict == "accepted") for i, token in enumerate(step.drafted)
                    if token.verdict in JUDGED]
        position += len(step.committed)
    return out


class Tally:
    """One group of prompts' counts: the output positions the baseline decoded in each bin, and per lane and bin
    [judged, accepted] (as engine.contract.summary.position_counts counts per position)."""

    def __init__(self, methods: list[str], bins: int):
        self.positions = [0] * bins
        self.counts = {m: [[0, 0] for _ in range(bins)] for m in methods}

    def rows(self, edges=EDGES) -> list[dict]:
        """Per bin: its positions and share, and each lane's drafts, accepted, rate and Wilson interval (the
        per-position rows of engine/measure/decide.py, one bin where they have one position)."""
        lanes = {m: position_rows(counts) for m, counts in self.counts.items()}
        return [{"bin": bin_label(b, edges), "positions": positions, "share": positions / max(1, sum(self.positions)),
                 "lanes": {m: {k: v for k, v in rows[b].items() if k != "position"} for m, rows in lanes.items()}}
                for b, positions in enumerate(self.positions)]


def measure(engine, methods: list[str], prompts: list[str], drafts: int, max_new_tokens: int,
            kinds: list[str] | None = None, edges=EDGES) -> dict:
    """The rows of every prompt together, and of each kind of text apart where `kinds` labels the prompts; the
    lanes that did not write the baseline's tokens, by prompt index."""
    bins = len(edges) - 1
    groups = {"all": Tally(methods, bins)}
    mismatches: dict[str, list[int]] = {}
    for p, prompt in enumerate(prompts):
        tallies = [groups["all"]]
        if kinds:
            tallies.append(groups.setdefault(kinds[p], Tally(methods, bins)))
        baseline = engine.generate(prompt, GenerationConfig(method=BASELINE, max_new_tokens=max_new_tokens))
        where = [bin_of(p1, edges) for p1 in argmax_probability(engine, baseline.prompt_ids, baseline.output_ids)]
        for tally in tallies:
            for b in where:
                tally.positions[b] += 1
        for m in methods:
            result = engine.generate(prompt, GenerationConfig(method=m, max_new_tokens=max_new_tokens,
                                                              drafts_per_step=drafts))
            if result.output_ids != baseline.output_ids:
                mismatches.setdefault(m, []).append(p)
                continue
            for position, _, accepted in judged_positions(result):
                if position < len(where):  # a draft past the last token the run kept is never judged
                    for tally in tallies:
                        tally.counts[m][where[position]][0] += 1
                        tally.counts[m][where[position]][1] += accepted
    by_kind = {kind: tally.rows(edges) for kind, tally in groups.items() if kind != "all"}
    return {"rows": groups["all"].rows(edges), "by_kind": by_kind, "mismatches": mismatches}


def table(rows: list[dict], methods: list[str]) -> list[str]:
    head = f"{'target argmax p':<18} {'share':>6}  " + "  ".join(f"{method(m).label:>24}" for m in methods)
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = [position_words([row["lanes"][m]]).rjust(24) for m in methods]  # rate [interval] n, * if few
        lines.append(f"{row['bin']:<18} {row['share']:>6.1%}  " + "  ".join(cells))
    return lines


def describe(measured: dict, methods: list[str]) -> str:
    lines = table(measured["rows"], methods)
    for kind, rows in sorted(measured["by_kind"].items()):
        lines += ["", f"{kind} prompts:"] + table(rows, methods)
    for m, where in measured["mismatches"].items():
        lines.append(f"NOT the baseline's tokens: {m} on prompts {', '.join(map(str, where))}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="the models (default: %(default)s)")
    parser.add_argument("--methods", type=lambda v: v.split(","), default=None,
                        help="drafting lanes, comma-separated (default: every chain lane the preset has)")
    parser.add_argument("--prompts", type=Path, default=HELDOUT_PROMPTS)
    parser.add_argument("--limit", type=int, default=24, help="the first N prompts (0 = all)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--drafts-per-step", type=int, default=7, help="K, every lane")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write every count here")
    args = parser.parse_args(argv)
    try:
        if args.preset not in PRESETS:
            raise EngineError(f"unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
        if args.drafts_per_step < 1 or args.max_new_tokens < 1:
            raise EngineError("--drafts-per-step and --max-new-tokens take a number ≥ 1")
        engine = Engine.load(args.preset, threads=args.threads)
        chains = [m for m in engine.methods() if m != BASELINE and not method(m).grows_from]
        methods = args.methods or chains
        if unknown := [m for m in methods if m not in chains]:
            raise EngineError(f"{', '.join(unknown)}: not a chain lane of {args.preset!r}; "
                              f"choose from {', '.join(chains)}")
        rows = read_prompt_file(args.prompts)[:args.limit or None]
        prompts = [row["prompt"] for row in rows]
        kinds = [row["kind"] for row in rows] if all("kind" in row for row in rows) else None
        measured = measure(engine, methods, prompts, args.drafts_per_step, args.max_new_tokens, kinds)
    except (EngineError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{len(prompts)} prompts, {args.max_new_tokens} new tokens, K = {args.drafts_per_step}, temperature 0; "
          f"acceptance of every judged draft, by the target's probability of its own token there "
          f"(95 % Wilson intervals)")
    print(describe(measured, methods))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"preset": args.preset, "prompts": str(args.prompts), "limit": args.limit,
                                         "max_new_tokens": args.max_new_tokens, "drafts_per_step": args.drafts_per_step,
                                         "edges": [min(e, 1.0) for e in EDGES], **measured},
                                        indent=1))
    return 1 if measured["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
