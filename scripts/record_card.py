"""Record the model card's speed tables and write the card: `python -m scripts.record_card`.

Runs the bench three times on the CPU with the card's settings (temperature 0 on a quiet machine, the same beside a
busy core, and temperature 1), then `python -m engine.train card` with the three reports, which measures the rest of
the card (τ, acceptance, sizes) and writes assets/model_card.json and assets/MODEL_CARD.md; finally stamps the card
with its provenance (engine/measure/provenance.py: the build, device, threads, the quiet run's baseline speed, date,
this command, the duration). The reports stay in runs/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARD_JSON = ROOT / "assets" / "model_card.json"
CARD_MD = ROOT / "assets" / "MODEL_CARD.md"
RUNS = ROOT / "runs"
PROMPTS = 24  # the held-out prompts of each bench run (the card's τ table is over all of them)
SETTINGS = ("--device", "cpu", "--max-new-tokens", "64", "--drafts-per-step", "serial=4,one_pass=7", "--no-hf")
REPORTS = {"quiet": (), "busy": ("--busy",), "sampled": ("--temperature", "1")}
COMMAND = "python -m scripts.record_card"


def bench_args(kind: str, prompts: int) -> list[str]:
    return ["-m", "engine.measure.bench", *SETTINGS, "--limit", str(prompts), *REPORTS[kind],
            "--json", str(RUNS / f"card-bench-{kind}.json")]


ENGINE_STARTS = 4  # the three bench runs and the card's own pass each load the models


def lane_tokens(prompts: int = PROMPTS) -> int:
    """The tokens its lanes write, summed: each bench run's lanes (the card's, the ablations and the variants beside
    them) over `prompts`, and the card's own pass over every held-out prompt (scripts/record.py turns them into an
    estimate of its time)."""
    from engine.contract.presets import load_prompts

    bench_lanes, card_lanes = 12, 9
    return 3 * bench_lanes * prompts * 64 + card_lanes * len(load_prompts()) * 64


def stamp(duration_s: float, command: str) -> dict:
    """The card in assets/ with its provenance block (its baseline: the quiet bench run's)."""
    from engine.measure.provenance import provenance

    card = json.loads(CARD_JSON.read_text(encoding="utf-8"))
    quiet = card["bench"]["quiet"]
    card["provenance"] = provenance(quiet["device"], quiet["threads"], command, duration_s,
                                    quiet["baseline_tokens_per_s"],
                                    f"the quiet bench run's baseline over {quiet['num_prompts']} held-out prompts")
    CARD_JSON.write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    from engine.train.card import render_markdown

    CARD_MD.write_text(render_markdown(card), encoding="utf-8")
    return card


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=PROMPTS, help="held-out prompts of each bench run")
    args = parser.parse_args(argv)
    started = time.monotonic()
    RUNS.mkdir(exist_ok=True)
    for kind in REPORTS:
        print(f"bench, {kind}: python {' '.join(bench_args(kind, args.prompts))}", flush=True)
        if subprocess.run([sys.executable, *bench_args(kind, args.prompts)], cwd=ROOT).returncode:
            print(f"error: the {kind} bench run failed", file=sys.stderr)
            return 1
    card = ["-m", "engine.train", "card", *(a for kind in REPORTS for a in ("--bench", str(RUNS / f"card-bench-{kind}.json")))]
    print(f"card: python {' '.join(card)}", flush=True)
    if subprocess.run([sys.executable, *card], cwd=ROOT, stdout=subprocess.DEVNULL).returncode:
        print("error: the card failed", file=sys.stderr)
        return 1
    command = COMMAND + ("" if args.prompts == PROMPTS else f" --prompts {args.prompts}")
    stamp(time.monotonic() - started, command)
    print(f"{CARD_JSON}: stamped, {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
