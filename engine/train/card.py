"""The model card of the embedded models: `python -m engine.train card` measures and writes it.

Everything in the card is measured on the shipped weights (float16 on disk, float32 on the CPU): sizes,
held-out loss on modules no model trained on, each lane's τ and per-position acceptance on the held-out
prompts at temperature 0, and how often the target's greedy output falls into a loop within 64 tokens.
Its speed table is the bench's (`--bench REPORT`, a quiet run and a busy one of `python -m engine.measure.bench`):
the card takes a report only of the weights it describes, and keeps it while they stay the same.
"""

from __future__ import annotations

import json
import platform
import textwrap
from pathlib import Path

import torch

from ..contract.methods import BASELINE, EAGLE3, METHOD_REGISTRY, kind_label, method_label
from ..contract.methods import method as method_entry
from ..contract.presets import ASSETS_DIR, DEFAULT_PRESET, PRESETS, ablation_shipped, resolve_model_path, weights_digests
from ..contract.summary import per_position_acceptance
from ..contract.types import GenerationConfig
from ..loop import Engine
from ..measure.bench import load_prompts
from .lm import heldout_loss, heldout_windows, tokenize_corpus
from .recipe import phases, recipe, recipe_text

# The settings a quiet and a busy bench report must share.
CARD_WIDTH = 110  # the card's prose lines wrap here
BENCH_SETTINGS = ("num_prompts", "max_new_tokens", "serial_k", "drafts_per_block")
LOOP_WINDOW = 24  # a loop: the last this-many tokens repeat with some period ≤ LOOP_MAX_PERIOD
LOOP_MAX_PERIOD = 12
NEW_TOKENS = 64
# The public code that loads each shipped folder as it is, by the architecture its config.json names (the fields
# and weight names those loaders read are checked in tests/formats/test_shipped_formats.py).
REFERENCE_LOADERS = {
    "target": ("Qwen3ForCausalLM", "transformers' `Qwen3ForCausalLM`"),
    "small-lm-drafter": ("Qwen3ForCausalLM", "transformers' `Qwen3ForCausalLM`"),
    "eagle3-drafter": ("Qwen3Eagle3Model", "DeepSpec's `Qwen3Eagle3Model` (deepseek-ai/DeepSpec), which its "
                       "`Qwen3Eagle3Evaluator` runs; stores frozen copies of the target's embedding table and LM head"),
    "dflash-drafter": ("DFlashDraftModel", "z-lab's `DFlashDraftModel` (z-lab/dflash, PyTorch; their MLX `load_draft` "
                       "reads the same config.json); drafts with the target's embedding table and LM head"),
    "dspark-drafter": ("Qwen3DSparkModel", "DeepSpec's `Qwen3DSparkModel`, which its `Qwen3DSparkEvaluator` runs; "
                       "stores frozen copies of the target's embedding table and LM head, as DeepSpec's checkpoints do"),
}
# the checkpoints drafted with above temperature 0 are saved in their temperature-0 twin's format (a drafter whose
# one folder serves both temperatures has none)
REFERENCE_LOADERS.update({name: REFERENCE_LOADERS[name.removesuffix("-sampled")]
                          for name in PRESETS["tiny"].sampled_drafters.values() if name.endswith("-sampled")})
# DFlash's ablation trained without the target's features (`dflash --no-target-features`), where it is shipped:
# z-lab's layout, fc and hidden_norm kept though never read or trained, so their class loads it, but it knows no
# `target_features` flag
REFERENCE_LOADERS.update({name: (
    "DFlashDraftModel", "z-lab's `DFlashDraftModel` loads it (the same layout), but would inject the target's features, "
    "which it never learned to read: only SpecLab reads its `dflash_config` flag `target_features: false`")
    for name in PRESETS["tiny"].ablation_drafters.values() if ablation_shipped(name)})


def bench_lanes() -> tuple[str, ...]:
    """The bench's lanes the card's speed table shows: every drafting method, and the variants the registry
    marks for the card (the others are in docs/benchmarks.md)."""
    return tuple(name for m in METHOD_REGISTRY.values() if m.drafts
                 for name in (m.name, *(f"{m.name}_{v.suffix}" for v in m.variants if v.on_card)))


def is_loop(ids: list[int]) -> bool:
    """True when the tail of `ids` is periodic: the output has fallen into repeating itself."""
    tail = ids[-LOOP_WINDOW:]
    if len(tail) < LOOP_WINDOW:
        return False
    return any(all(tail[i] == tail[i - p] for i in range(p, len(tail))) for p in range(1, LOOP_MAX_PERIOD + 1))


def record_chain(record: dict) -> list[dict]:
    """A training.json and the records it keeps under "earlier", oldest first: a model trained on with
    `--from-shipped` keeps the record it had before each round."""
    chain = [record]
    while "more" in chain[0] and "earlier" in chain[0]:
        chain.insert(0, chain[0]["earlier"])
    return chain


def rounds_text(record: dict) -> str | None:
    """What the `--from-shipped` rounds a model had did (steps per round), or None if it had none."""
    rounds = []
    for later in record_chain(record)[1:]:
        more = later["more"]
        if "phase" in more:  # the target: a further cycle, then perhaps unlikelihood
            unloop = more.get("unloop_phase", {}).get("steps")
            rounds.append(f"{more['phase']['steps']} steps" + (f" + {unloop} of unlikelihood" if unloop else ""))
        elif "greedy_phase" in more:
            rounds.append(f"{more['greedy_phase']['steps']} greedy steps")
    if not rounds:
        return None
    return f"{len(rounds)} round{'s' if len(rounds) > 1 else ''} ({', then '.join(rounds)})"


def grown_from(record: dict) -> int | None:
    """How many layers the target had before it grew (`--grow-layers`), in whichever round it grew; or None."""
    return next((r["grow_phase"]["from_layers"] for r in record_chain(record) if "grow_phase" in r), None)


def _folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*.safetensors")) / 1e6


def _shipped_models(engine: Engine) -> dict:
    """The target and every drafter of the engine (those drafted with above temperature 0 too, and the ablations
    trained without the target's features, where shipped), by their folder in assets/."""
    tiny = PRESETS["tiny"]
    return {"target": engine.target,
            # a tree lane drafts with its chain's network: that network's folder is named once, by the chain
            **{tiny.drafters[m]: engine.drafter_models[m] for m in engine.drafter_models if m in tiny.drafters},
            **{tiny.sampled_drafters[m]: engine.sampled_drafter_models[m] for m in engine.sampled_drafter_models
               if m in tiny.sampled_drafters},
            **{tiny.ablation_drafters[m]: engine.ablation_drafter_models[m] for m in engine.ablation_drafter_models}}


def card_lanes(engine: Engine) -> list[tuple[str, str, dict]]:
    """The card's lanes as (name, method, GenerationConfig overrides): every method, then each registry ablation
    (methods.Method.ablations) whose checkpoint the engine holds, named method_suffix."""
    return [*((m, m, {}) for m in engine.methods()),
            *((f"{m}_{v.suffix}", m, dict(v.overrides)) for m in engine.ablation_drafter_models
              for v in method_entry(m).ablations)]


def _file_facts(name: str, model) -> dict:
    """A folder's parameters (as loaded, before any lane runs) and size on disk."""
    return {"parameters": sum(p.numel() for p in model.parameters()), "disk_mb": round(_folder_mb(ASSETS_DIR / name), 2)}


def measure(runs_dir: Path) -> dict:
    engine = Engine.load("tiny", "cpu")
    streams = tokenize_corpus(engine.tokenizer, runs_dir / "tokens.pt")
    windows = heldout_windows(streams["heldout"], 512)
    card: dict = {"python_version": platform.python_version(), "torch_version": torch.__version__, "models": {}}
    for name, model in _shipped_models(engine).items():
        if model is None:
            continue
        record = json.loads((ASSETS_DIR / name / "training.json").read_text())
        entry = {**_file_facts(name, model), "train_minutes": record.get("train_minutes"), "rounds": rounds_text(record),
                 "recipe": recipe(record)}
        if record.get("target_features") is False:  # an ablation (`dflash --no-target-features`)
            entry["target_features"] = False
        if name in ("target", "small-lm-drafter"):
            with torch.inference_mode():
                entry["heldout_ce"] = round(heldout_loss(model, windows), 4)
        card["models"][name] = entry
        if name == "target":
            card["target_shape"] = {"layers": model.config.num_hidden_layers, "width": model.config.hidden_size,
                                    "grown_from": grown_from(record)}
    prompts = load_prompts()
    lanes = {}
    loops = 0
    target_forward_s = None  # the baseline's verify time per step: one 1-token target forward (it runs first)
    for name, method, overrides in card_lanes(engine):
        steps = []
        draft_s = verify_s = 0.0
        for prompt in prompts:
            drafts = method_entry(method).default_drafts or 1
            config = GenerationConfig(method=method, max_new_tokens=NEW_TOKENS, drafts_per_step=drafts,
                                      scheduler="none", **overrides)  # every drafted token verified: per position
            result = engine.generate(prompt, config)
            steps.extend(result.steps)
            draft_s, verify_s = draft_s + result.summary.draft_s, verify_s + result.summary.verify_s
            if method == BASELINE:
                loops += is_loop(list(result.output_ids))
        if method == BASELINE:
            target_forward_s = verify_s / len(steps)
            continue
        committed = sum(len(s.committed) for s in steps)
        lanes[name] = {"drafts_per_step": drafts, "drafter": result.drafter, "tau": round(committed / len(steps), 3),
                         "per_position_acceptance": [round(r, 3) for r in per_position_acceptance(steps) if r is not None],
                         "draft_over_target_forward": round(draft_s / len(steps) / target_forward_s, 3),
                         "verify_over_target_forward": round(verify_s / len(steps) / target_forward_s, 3)}
    card["lanes"] = lanes
    card["target_forward_ms"] = round(target_forward_s * 1e3, 3)
    card["heldout_prompts"] = len(prompts)
    card["greedy_loop_rate"] = round(loops / len(prompts), 3)
    card["total_disk_mb"] = round(sum(m["disk_mb"] for m in card["models"].values()), 2)
    return card


SAMPLED_FIGURES = ("speedup", "tau", "expected_acceptance", "one_minus_tv", "judged")


def sampled_entry(report: dict, weights: dict[str, str]) -> dict:
    """What the card keeps of a bench report above temperature 0 (`--temperature T`): each lane's speedup, τ,
    expected acceptance and 1 − TV, its temperature-0 weights beside it where it has weights for sampling."""
    try:
        if report["preset"] != "tiny":
            raise ValueError(f"a bench report of the {report['preset']!r} preset, not of the embedded models")
        if report.get("weights") != weights:
            raise ValueError("a bench report of other weights than those now in assets/: run the bench again")
        lanes = report["lanes"]
        shown = [name for m in bench_lanes() for name in (m, f"{m}_greedy_weights") if name in lanes]
        return {**{key: report[key] for key in (*BENCH_SETTINGS, "temperature", "verify_rule")},
                "device": report["device"], "busy": bool(report.get("busy_machine")),
                "baseline_tokens_per_s": lanes[BASELINE]["tokens_per_s"],
                "lanes": {name: {key: lanes[name].get(key) for key in SAMPLED_FIGURES} for name in shown}}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a report of python -m engine.measure.bench (no {exc})") from None


def _trained_on_sampled_rows(folder: str) -> bool:
    """Whether a shipped drafter's last phase learned from the target's sampled continuations too (a self-distillation
    on its greedy and sampled rows), read from its training record."""
    path = Path(resolve_model_path(folder)) / "training.json"
    if not path.exists():
        return False
    steps = phases(json.loads(path.read_text(encoding="utf-8")))
    return bool(steps) and "sampled" in steps[-1]["data"]


def sampling_weights(preset=None) -> str:
    """What each drafter of a preset (the embedded one by default) drafts with above temperature 0, read from the
    preset and the folders it names: "EAGLE-3's weights trained for it, DSpark's one set of weights with its T = 1
    calibration, DFlash's one set of weights trained at both temperatures, Classic's own weights, as at temperature 0"."""
    from ..models import read_config

    preset = preset or PRESETS[DEFAULT_PRESET]
    groups: dict[str, list[str]] = {"own": [], "calibrated": [], "both": [], "same": []}
    for method, folder in preset.drafters.items():
        name = f"{'EAGLE-3' if method == EAGLE3 else method_label(method)}'s"
        if preset.sampled_drafters.get(method, folder) != folder:
            groups["own"].append(name)
        elif "confidence_temperatures_sampled" in read_config(folder, local_files_only=True):
            groups["calibrated"].append(name)
        elif _trained_on_sampled_rows(folder):
            groups["both"].append(name)
        else:
            groups["same"].append(name)
    words = {"own": "weights trained for it",
             "calibrated": f"one set of weights with {'their' if len(groups['calibrated']) > 1 else 'its'} T = 1 "
                           "calibration",
             "both": "one set of weights trained at both temperatures",
             "same": "own weights, as at temperature 0"}
    return ", ".join(f"{_and(names)} {words[key]}" for key, names in groups.items() if names)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def sampled_lines(sampled: dict) -> list[str]:
    """The card's table above temperature 0."""
    lines = ["", f"Above temperature 0, from one run of `python -m engine.measure.bench --temperature {sampled['temperature']:g}` "
             f"on these weights ({sampled['num_prompts']} held-out prompts, {sampled['max_new_tokens']} new tokens, the "
             f"{sampled['verify_rule']} rule, K = {sampled['serial_k']}, {sampled['drafts_per_block']} per block, on "
             f"{sampled['device']}; outputs are samples). Each drafter drafts with what it holds for sampling: "
             f"{sampling_weights()}; `_greedy_weights` rows draft with the temperature-0 weights and calibration "
             f"instead. "
             f"Expected acceptance: the mean of min(1, p/q) over judged drafts; 1 − TV: the mean overlap of the two "
             f"distributions, which it equals in expectation.", "",
             "| lane | τ | expected acceptance | 1 − TV | judged drafts | speedup |", "|---|---|---|---|---|---|"]
    for name, lane in sampled["lanes"].items():
        figures = [f"{lane[key]:.3f}" if lane.get(key) is not None else "—" for key in ("expected_acceptance",
                                                                                        "one_minus_tv")]
        lines.append(f"| {name} | {lane['tau']:.2f} | {figures[0]} | {figures[1]} | {lane.get('judged') or '—'} | "
                     f"{lane['speedup']:.2f}× |")
    return lines


def bench_entry(report: dict, weights: dict[str, str]) -> dict:
    """What the card keeps of one `python -m engine.measure.bench` report. Refuses, in one line, a report of another
    preset or of other weights than `weights` (the digests of assets/), or one whose lanes did not all write
    the baseline's output."""
    try:
        if report["preset"] != "tiny":
            raise ValueError(f"a bench report of the {report['preset']!r} preset, not of the embedded models")
        if report.get("weights") != weights:
            raise ValueError("a bench report of other weights than those now in assets/: run the bench again")
        if not report["identical_outputs"]:
            raise ValueError("a bench report in which some lane did not write the baseline's output")
        lanes = report["lanes"]
        return {"busy": bool(report.get("busy_machine")), **{key: report[key] for key in BENCH_SETTINGS},
                "device": report["device"], "threads": report["threads"],
                "baseline_tokens_per_s": lanes[BASELINE]["tokens_per_s"],
                "lanes": {m: {key: lanes[m][key] for key in ("speedup", "decode_speedup", "tau",
                                                             "per_position_acceptance")}
                          for m in bench_lanes() if m in lanes}}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a report of python -m engine.measure.bench (no {exc})") from None


def bench_pair(reports: list[dict], weights: dict[str, str]) -> dict:
    """The card's speed figures: one report of a quiet machine and at most one of a busy one (`--busy`), run with
    the same settings, and at most one above temperature 0, as {"quiet": entry, "busy": entry or None,
    "sampled": entry or None}."""
    hot = [report for report in reports if report.get("temperature")]
    if len(hot) > 1:
        raise ValueError(f"the card takes at most one bench report above temperature 0, got {len(hot)}")
    entries = [bench_entry(report, weights) for report in reports if not report.get("temperature")]
    quiet = [e for e in entries if not e["busy"]]
    busy = [e for e in entries if e["busy"]]
    if len(quiet) != 1 or len(busy) > 1:
        raise ValueError(f"the card takes one bench report of a quiet machine and at most one of a busy one "
                         f"(--busy), got {len(quiet)} quiet and {len(busy)} busy")
    if busy and any(busy[0][key] != quiet[0][key] for key in BENCH_SETTINGS):
        raise ValueError("the quiet and the busy bench reports ran different settings (prompts, tokens, K or block)")
    return {"quiet": quiet[0], "busy": busy[0] if busy else None,
            "sampled": sampled_entry(hot[0], weights) if hot else None}


def kept_bench(previous: dict | None, weights: dict[str, str]) -> dict | None:
    """The speed figures of the card written before, while the weights it described are still those in assets/."""
    if previous and previous.get("weights") == weights:
        return previous.get("bench")
    return None


def bench_lines(bench: dict) -> list[str]:
    """The card's speed table: each lane's τ, per-position acceptance and speedups, quiet and busy."""
    quiet, busy = bench["quiet"], bench["busy"]
    runs = ("one run" + (" of a quiet machine and one with `--busy` (a second process spinning on one of the two "
                         "cores)" if busy else ""))
    lines = ["", f"Speed, from {runs} of `python -m engine.measure.bench` on these weights ({quiet['num_prompts']} held-out "
             f"prompts, {quiet['max_new_tokens']} new tokens, temperature 0, K = {quiet['serial_k']}, "
             f"{quiet['drafts_per_block']} per block, on {quiet['device']}; every lane's output "
             f"identical to the baseline's). Speedup: the baseline's wall time over the lane's; decode: the same "
             f"without the prefill. τ and per-position acceptance as the quiet run measured them (DSpark's "
             f"scheduler verifies part of each block; `dspark_verify_all` all of it). Only ratios within one run "
             f"compare: a machine's speed can move more between two runs than a busy core moves it.", ""]
    header = "| lane | τ | per-position acceptance | quiet: speedup | decode |"
    rule = "|---|---|---|---|---|"
    if busy:
        header, rule = header + " busy: speedup | decode |", rule + "---|---|"
    lines += [header, rule]
    base = f"| baseline | 1.00 | — | 1.00× ({quiet['baseline_tokens_per_s']:.1f} tokens/s) | 1.00× |"
    if busy:
        base += f" 1.00× ({busy['baseline_tokens_per_s']:.1f} tokens/s) | 1.00× |"
    lines.append(base)
    for method, lane in quiet["lanes"].items():
        ppa = ", ".join("—" if r is None else f"{r:.2f}" for r in lane["per_position_acceptance"])
        row = f"| {method} | {lane['tau']:.2f} | {ppa} | {lane['speedup']:.2f}× | {lane['decode_speedup']:.2f}× |"
        if busy:
            other = busy["lanes"].get(method)
            row += (f" {other['speedup']:.2f}× | {other['decode_speedup']:.2f}× |" if other else " — | — |")
        lines.append(row)
    return lines


def shapes_text(card: dict) -> str:
    """Why the models have the depths they have, with this card's own measured costs."""
    lanes = card["lanes"]
    # the first one-pass method and the first serial one of the registry (DFlash, and AR served by EAGLE-3)
    one_pass = next(m for m in METHOD_REGISTRY.values() if m.drafts and m.one_pass)
    serial = next(m for m in METHOD_REGISTRY.values() if m.drafts and not m.one_pass)
    block, ar = lanes.get(one_pass.name, {}), lanes.get(serial.name, {})
    verify = block.get("verify_over_target_forward")
    costs = ""
    if verify is not None and "draft_over_target_forward" in ar:
        costs = (f" Measured above: verifying a block of 8 costs {verify:.2f} target forwards, {one_pass.label}'s one "
                 f"pass over it {block['draft_over_target_forward']:.2f}, {kind_label(serial.kinds[0])}'s "
                 f"{ar['drafts_per_step']} serial steps {ar['draft_over_target_forward']:.2f}.")
    shape = card["target_shape"]
    layers, width, grown_from = shape["layers"], shape["width"], shape["grown_from"]
    replaced = ("the same parameter count as the 8 layers of width 256 it replaced (held-out loss 2.47 then), which "
                "left no room for a cheap drafter and verified 8 tokens at 1.6 forwards")
    history = replaced + "."
    if grown_from:
        history = (f"it was trained as {grown_from} layers — {replaced} — then grown to {layers} computing the same "
                   f"function and trained on (`--grow-layers`, engine/train/grow.py): {layers} target layers beside the "
                   f"block drafters' 3 is the ratio of Qwen3-8B's 36 layers to DFlash's 5 (docs/experiments.md has the "
                   f"costs before and after).")
    return f"""Why these shapes. On a CPU a forward of a model this small costs mostly per layer (operator dispatch and
the Python around each operator) and little per token: verifying 8 tokens costs well under 2 target forwards,
not 8. So a drafter's cost is set by its depth against the target's, as on a GPU, where the real pairs the
papers use put a 1-layer EAGLE-3 or a 5-layer block drafter beside a 36-layer target (Qwen3-4B, Qwen3-8B). The
target is therefore deep and narrow: {layers} layers of width {width}; {history} EAGLE-3 has one layer and drafts
serially (K forwards per step); DFlash and DSpark draft the whole block in one forward of 3 layers reading 5 of
the target's layers (one layer was tried against the 8-layer target: draft cost halved, but τ fell from 2.29 to
1.89, a net loss).{costs} The classic small LM has 2 layers of its own: it reads only tokens, and shows what a
drafter without the target's features costs and achieves."""


def render_markdown(card: dict) -> str:
    lines = ["# Model card: the embedded SpecLab models", "",
             "Tiny models trained by this project's own scripts (`python -m engine.train ...`, see docs/embedded-models.md) on the",
             "Python standard library's source (PSF licence), file list in `corpus_manifest.json`. They exist to",
             "make speculative decoding visible offline on a laptop CPU; they are not useful language models.",
             "Every figure below was measured by `python -m engine.train card` on the shipped float16 weights, but the",
             "speed table, which is the bench's on the same weights (`--bench`).", "",
             "| model | parameters | on disk | trained | held-out loss (nats/token) |", "|---|---|---|---|---|"]
    for name, m in card["models"].items():
        loss = f"{m['heldout_ce']:.3f}" if "heldout_ce" in m else (
            "— (reads no target features: an ablation, the DFlash recipe without them; see τ)"
            if m.get("target_features") is False else "— (reads target features; see τ)")
        lines.append(f"| {name} | {m['parameters'] / 1e6:.2f} M | {m['disk_mb']:.1f} MB | {m['train_minutes']} min | {loss} |")
    further = [f"{name} {m['rounds']}" for name, m in card["models"].items() if m.get("rounds")]
    if further:  # the models `--from-shipped` trained on, from the weights an earlier family shipped
        lines += ["", "Trained on from the weights shipped before (`python -m engine.train STAGE --from-shipped`, "
                  "`scripts/train_family.sh --more`): " + "; ".join(further) + "."]
    recipes = {name: m["recipe"] for name, m in card["models"].items() if m.get("recipe")}
    if recipes:
        lines += ["", "How each was trained, phase by phase from its `training.json` (steps: data (labels); a drafter's "
                  "\"target's continuations\" are the target's own outputs on corpus text; tokens seen = steps × batch × "
                  "length; minutes on one CPU core):", "",
                  "| model | phases, in order | steps | tokens seen | minutes |", "|---|---|---|---|---|"]
        lines += [f"| {name} | {recipe_text(r)} | {r['steps']:,} | {r['tokens'] / 1e6:.1f} M | {r['minutes']} |"
                  for name, r in recipes.items()]
    lines += ["", f"All weights together: {card['total_disk_mb']:.1f} MB.", "",
              "Each folder loads as it is, no weight missing or left over, in the public code its `architectures` "
              "names (config fields and weight names as that code reads them: tests/formats/test_shipped_formats.py):", "",
              "| folder | architectures | loads in |", "|---|---|---|"]
    lines += [f"| {name} | {REFERENCE_LOADERS[name][0]} | {REFERENCE_LOADERS[name][1]} |"
              for name in card["models"] if name in REFERENCE_LOADERS]
    lines += ["",
              f"On the {card['heldout_prompts']} held-out prompts (`assets/prompts/heldout.jsonl`), "
              f"{NEW_TOKENS} new tokens, temperature 0:", "",
              "| lane | K | τ (tokens per step, bonus included) | per-position acceptance | draft / verify per step, "
              "in target forwards |", "|---|---|---|---|---|"]
    for method, lane in card["lanes"].items():
        ppa = ", ".join(f"{r:.2f}" for r in lane["per_position_acceptance"])
        drafter = f" ({lane['drafter']})" if lane.get("drafter") else ""
        costs = (f"{lane['draft_over_target_forward']:.2f} / {lane['verify_over_target_forward']:.2f}"
                 if "draft_over_target_forward" in lane else "—")
        lines.append(f"| {method}{drafter} | {lane['drafts_per_step']} | {lane['tau']:.2f} | {ppa} | {costs} |")
    if "target_forward_ms" in card:
        lines += ["", f"One target forward (the baseline's step) took {card['target_forward_ms']:.2f} ms here; the last "
                  "column gives each lane's drafting and verification per step in those units (single runs: two on "
                  "a quiet machine agree within 10 %; another load moves them further: docs/embedded-models.md)."]
    if card.get("bench"):
        lines += bench_lines(card["bench"])
        if card["bench"].get("sampled"):
            lines += sampled_lines(card["bench"]["sampled"])
    lines += ["", shapes_text(card)]
    if card.get("provenance"):  # scripts/record_card.py stamps it: what made the card (engine/measure/provenance.py)
        made = card["provenance"]
        lines += ["", f"Recorded {made['recorded_at'][:10]} on {made['device']}, engine build {made['build'][:10]}, by "
                  f"`{made['command']}` ({made['duration_s'] / 60:.0f} min)."]
    lines += ["", f"Greedy loops: the target's greedy output falls into a loop (its last {LOOP_WINDOW} tokens repeat "
              f"with a period of at most {LOOP_MAX_PERIOD}) within {NEW_TOKENS} tokens on "
              f"{card['greedy_loop_rate'] * 100:.0f}% of the held-out prompts.", "",
              f"Measured with Python {card['python_version']}, torch {card['torch_version']}."]
    # prose wrapped to short lines (tables stay one row a line); markdown renders them the same
    return "\n".join(line if line.startswith("|") or len(line) <= CARD_WIDTH
                     else textwrap.fill(line, CARD_WIDTH, break_on_hyphens=False) for line in lines) + "\n"


def read_report(path: Path) -> dict:
    """A bench report's JSON; a missing or malformed file is a ValueError naming it."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None


def refresh_file_facts() -> dict:
    """The card written before, brought up to date with the files in assets/ after they were saved again without
    any change to what the models compute (`python -m engine.train reexport`, which checks that): each folder's
    parameters and size on disk, the total, the weights' digests. Its measurements stand, being of the same
    functions; weights that compute anything else need `python -m engine.train card`."""
    card_path = ASSETS_DIR / "model_card.json"
    card = json.loads(card_path.read_text())
    models = _shipped_models(Engine.load("tiny", "cpu"))
    for name, entry in card["models"].items():
        entry.update(_file_facts(name, models[name]))
    card["total_disk_mb"] = round(sum(m["disk_mb"] for m in card["models"].values()), 2)
    card["weights"] = weights_digests(PRESETS["tiny"])
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    (ASSETS_DIR / "MODEL_CARD.md").write_text(render_markdown(card))
    return card


def write_card(runs_dir: Path, bench_reports: list[Path] = ()) -> dict:
    """Measure the shipped models and write the card, with the speed figures of `bench_reports` (checked before
    the measurement starts) or, without them, those of the card written before while its weights are the same."""
    weights = weights_digests(PRESETS["tiny"])
    card_path = ASSETS_DIR / "model_card.json"
    previous = json.loads(card_path.read_text()) if card_path.exists() else None
    if bench_reports:
        bench = bench_pair([read_report(path) for path in bench_reports], weights)
    else:
        bench = kept_bench(previous, weights)
    card = measure(runs_dir)
    card["weights"], card["bench"] = weights, bench
    if bench is not None and not bench_reports and previous and previous.get("provenance"):
        # the speed figures kept are the earlier engine's: so is the card's provenance (scripts/record_card.py stamps
        # a card whose bench it ran)
        card["provenance"] = previous["provenance"]
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    (ASSETS_DIR / "MODEL_CARD.md").write_text(render_markdown(card))
    return card
