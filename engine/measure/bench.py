"""Benchmark: `python -m engine.measure.bench` measures every available method on the held-out prompts, and
Hugging Face transformers' own decoding on the same models in the same run as the peer.

    python -m engine.measure.bench --max-new-tokens 64 --drafts-per-step serial=4,one_pass=7 --json runs/bench.json

For each prompt the runs are interleaved (ours baseline, HF generate, ours ar, HF assisted generation),
so machine noise hits all of them alike; outputs must be identical token for token (greedy), and the
script exits non-zero when they are not. Speeds are totals over all prompts: tokens / wall seconds.

Beside the table it writes every lane's per-prompt rows (in the JSON and as CSV, --csv), the prompt file and its
sha256, every pair of lanes' paired speed ratio over prompts with its 95 % interval ("faster" only where that interval
excludes 1, else a tie) and per-position acceptance with its counts and intervals (engine/measure/decide.py);
--by COLUMN splits all of it by a label of the prompt file (.jsonl, .csv or plain text; docs/formats.md).

    python -m engine.measure.bench --prompts mine.csv --by kind --target ./Qwen3-4B \
        --drafter dflash=z-lab/Qwen3-4B-DFlash-b16 --device cuda --json runs/mine.json

runs your own checkpoints (engine/measure/pair.py), each block drafter at its trained block unless --drafts-per-step says.

    python -m engine.measure.bench --temperature 1 --no-hf --json runs/bench-t1.json

samples instead (every lane seeded alike, the rule --verify-rule): outputs are samples, not compared; each
drafter that has weights trained for sampling runs with them and, as `<lane>_greedy_weights`, with its
temperature-0 weights beside them; every lane reports its mean 1 − TV and expected acceptance.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from ..contract.methods import BASELINE, method as method_entry, method_id, method_names
from ..contract.presets import DEFAULT_PRESET, HELDOUT_PROMPTS, PRESETS, load_prompts, resolve_model_path, weights_digests
from ..contract.types import EngineError, GenerationConfig
from ..loop import Engine
from .decide import (MIN_DRAFTS, add_counts, labels_of, pair_words, pairwise, position_counts,
                     position_rows, position_words, prompt_file_record, read_prompt_file, rows_csv)
from .concurrency import (BATCHED_LANES, check_requests_at_once, concurrency_sweep, concurrency_table, lane_config,
                          scheduled_method)
from .pair import add_pair_arguments, default_drafts, load_pair_or_preset
from .sweep import budget_sweep, k_sweep

DEFAULT_PROMPTS = HELDOUT_PROMPTS


def _timed_hf_generate(engine: Engine, prompt_ids: list[int], max_new_tokens: int, assistant=None,
                       drafts_per_step: int = 4) -> tuple[list[int], float]:
    """transformers' `generate` (greedy), or assisted generation with a constant draft length K."""
    ids = torch.tensor([prompt_ids], device=engine.device)
    kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=engine.eos_id,
                  eos_token_id=engine.eos_id, attention_mask=torch.ones_like(ids))
    if assistant is not None:
        # The same K every step and no early exit on low confidence: the same work as our AR lane.
        assistant.generation_config.num_assistant_tokens = drafts_per_step
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        assistant.generation_config.assistant_confidence_threshold = 0.0
        kwargs["assistant_model"] = assistant
    _sync(engine)
    start = time.perf_counter()
    out = engine.target.generate(ids, **kwargs)
    _sync(engine)
    return out[0, len(prompt_ids):].tolist(), time.perf_counter() - start


def _sync(engine: Engine) -> None:
    if engine.device.type == "cuda":
        torch.cuda.synchronize()


class _Tally:
    """Totals of one lane over all prompts."""

    def __init__(self):
        self.tokens = self.step_tokens = self.steps = self.accepted = self.verified = 0
        self.wall_s = self.prefill_s = self.draft_s = self.verify_s = self.host_s = self.bubble_s = 0.0
        self.judged = 0  # drafted tokens the rule judged, and over them the sums of 1 − TV and of accept_prob
        self.overlap = self.expected = 0.0

    @classmethod
    def total(cls, tallies: list["_Tally"]) -> "_Tally":
        """The sum of several prompts' tallies."""
        out = cls()
        for t in tallies:
            for key, value in vars(t).items():
                setattr(out, key, getattr(out, key) + value)
        return out

    def add_run(self, result) -> None:
        s = result.summary
        self.tokens += s.num_new_tokens
        self.step_tokens += s.num_new_tokens - 1  # the prefill's token is not a step's
        self.steps += s.num_steps
        self.accepted += sum(step.num_accepted for step in result.steps)
        self.verified += sum(step.num_verified for step in result.steps)
        self.wall_s += s.wall_s
        self.prefill_s += s.prefill_s
        self.draft_s += s.draft_s
        self.verify_s += s.verify_s
        self.host_s += s.host_s
        self.bubble_s += s.bubble_s
        for token in (t for step in result.steps for t in step.drafted if t.accept_prob is not None):
            self.judged += 1
            self.expected += token.accept_prob
            self.overlap += 1 - token.tv if token.tv is not None else 1.0

    def add_timed(self, num_tokens: int, wall_s: float) -> None:
        self.tokens += num_tokens
        self.wall_s += wall_s

    def row(self, baseline: "_Tally") -> dict:
        row = {"tokens": self.tokens, "wall_s": round(self.wall_s, 4),
               "tokens_per_s": round(self.tokens / self.wall_s, 1), "speedup": round(baseline.wall_s / self.wall_s, 3)}
        if self.steps:
            # Without the prefill (the target reading the prompt, and a drafter its features): the time per
            # output token after the first, as serving benchmarks split it (TTFT / TPOT). With 64 new tokens
            # the prefill is a sizeable share of every lane's time; in the papers' 2k-token runs it is not.
            row["decode_speedup"] = round((baseline.wall_s - baseline.prefill_s) / (self.wall_s - self.prefill_s), 3)
            row["prefill_s"] = round(self.prefill_s, 4)
            row.update(tau=round(self.step_tokens / self.steps, 3), alpha=round(self.accepted / self.steps, 3),
                       draft_s=round(self.draft_s, 4), verify_s=round(self.verify_s, 4), host_s=round(self.host_s, 4),
                       bubble_s=round(self.bubble_s, 4),
                       verified_acceptance=round(self.accepted / self.verified, 3) if self.verified else None,
                       # drafting time per step over verify time per step: the seed's cost_draft / cost_target
                       draft_cost=round(self.draft_s / self.verify_s, 3))
        if self.judged:  # the mean chance the rule accepts a judged token, and the overlap 1 − TV it averages to
            row.update(judged=self.judged, expected_acceptance=round(self.expected / self.judged, 3),
                       one_minus_tv=round(self.overlap / self.judged, 3))
        return row


def variant_configs(configs: dict[str, GenerationConfig]) -> dict[str, GenerationConfig]:
    """Lanes measured besides the methods' defaults (the registry's variants: DFlash with overlap forced on
    and off, DSpark verifying every drafted token or cutting statically), so each switch's effect is measured
    in the same run; named method_suffix."""
    return {f"{m}_{v.suffix}": replace(config, **dict(v.overrides))
            for m, config in configs.items() for v in method_entry(m).variants}


def _calibration(engine: Engine) -> dict | None:
    """The calibration record of the scheduled (cutting) drafter that ships with this preset, if any."""
    preset = PRESETS.get(engine.preset)
    if preset is None or not preset.local:
        return None
    for m, checkpoint in preset.drafters.items():
        record = Path(resolve_model_path(checkpoint)) / "training.json"
        if method_entry(m).cuts and m in engine.methods() and record.exists():
            return json.loads(record.read_text()).get("calibration")
    return None


def parse_drafts_per_step(text: str) -> dict[str, int]:
    """--drafts-per-step: `N` for every drafting lane, or comma-separated `WHO=N` where WHO is a method or how a
    method drafts (`serial`, `one_pass`; methods.Method.drafting); one EngineError line for anything else."""
    spec = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        who, sep, value = part.rpartition("=")
        who = method_id(who.strip()) if sep else "*"
        if who != "*" and who not in ("serial", "one_pass") and who not in method_names():
            raise EngineError(f"--drafts-per-step {text!r}: {who!r} is neither a method nor serial / one_pass")
        if not value.strip().isdigit() or int(value) < 1:
            raise EngineError(f"--drafts-per-step {text!r}: {value.strip()!r} is not a whole number of 1 or more")
        spec[who] = int(value)
    return spec


def lane_drafts(engine: Engine, method: str, drafts_per_step: dict[str, int]) -> int:
    """A lane's drafts per step: its own entry in `drafts_per_step`, else its drafting style's, else the one for
    every lane, else a block drafter's trained block and any other method's default."""
    entry = method_entry(method)
    for who in (method, entry.drafting, "*"):
        if who in drafts_per_step:
            return drafts_per_step[who]
    return default_drafts(engine, method, max(entry.default_drafts, 1))


def run_bench(engine: Engine, prompts: list[str], max_new_tokens: int, drafts_per_step: dict[str, int] | None = None,
              with_hf: bool = True, temperature: float = 0.0, verify_rule: str = "rejection", seed: int = 0,
              methods: list[str] | None = None, tree_nodes: int = GenerationConfig.tree_nodes,
              label_rows: list[dict] | None = None, by: str | None = None) -> dict:
    """drafts_per_step: each lane's drafts per step by method, drafting style or "*" (lane_drafts; the serial lanes'
    also their transformers peer's); tree_nodes the tree lanes' node budget. methods: the lanes to run
    (default every lane here; the baseline always runs). Above temperature 0 the lanes sample (no transformers
    peers, no identity check) and each drafter with sampled weights also runs with its greedy ones. label_rows: each
    prompt's row of its prompt file (its labels go into the per-prompt rows); by: a label column whose values split
    every figure into groups (report["by"])."""
    labels = labels_of(label_rows if label_rows is not None else [{}] * len(prompts), by)
    drafts = {m: lane_drafts(engine, m, drafts_per_step or {}) for m in engine.methods() if method_entry(m).drafts}
    greedy = temperature == 0
    chosen = [m for m in engine.methods() if methods is None or m == BASELINE or m in methods]
    unknown = sorted(set(methods or ()) - set(engine.methods()))
    if unknown:
        raise EngineError(f"no lane {', '.join(unknown)} here; choose among {', '.join(engine.methods())}")
    configs = _lane_configs(engine, chosen, drafts, GenerationConfig(
        max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, verify_rule=verify_rule,
        tree_nodes=tree_nodes))
    runs = _Runs(engine, configs, drafts, with_hf and greedy)
    runs.one_prompt(prompts[0], tally=False)  # warm-up: first-call allocations and lazy init, not measured
    for i, prompt in enumerate(prompts):
        runs.one_prompt(prompt, tally=True)
        print(f"\r{i + 1}/{len(prompts)} prompts", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    measured = _Measured(runs.tallies, runs.positions, runs.identical if greedy else None,
                         _pairs(runs.names, list(configs), engine))
    everything = measured.summary(range(len(prompts)))
    preset = PRESETS.get(engine.preset)
    report = {"preset": engine.preset, "device": engine.device_name, "num_prompts": len(prompts),
              # which weights were measured (the model card takes a report of its own weights only)
              "weights": weights_digests(preset) if preset is not None else None,
              "calibration": _calibration(engine),
              "max_new_tokens": max_new_tokens, "drafts_per_step": {m: drafts[m] for m in chosen if m in drafts},
              # the model card's reading of the same: the serial lanes' K and the block drafters' blocks
              **drafting_summary({m: drafts[m] for m in chosen if m in drafts}),
              "temperature": temperature, "verify_rule": verify_rule, "seed": seed, "lanes": everything["lanes"],
              "ratios": runs.ratios(everything["lanes"]), "pairwise": everything["pairwise"], "min_drafts": MIN_DRAFTS,
              "identical_outputs": not runs.mismatches, "mismatches": runs.mismatches[:20],
              "prompt_rows": measured.prompt_rows(label_rows),
              "torch": torch.__version__, "threads": torch.get_num_threads()}
    if labels is not None:
        report["by"] = {"column": by, "groups": measured.groups(labels)}
    return report


def _lane_configs(engine: Engine, chosen: list[str], drafts: dict[str, int], common: GenerationConfig
                  ) -> dict[str, GenerationConfig]:
    """Every lane's config: each chosen method's with its drafts per step and the settings `common` holds, the
    registry's variants beside them, and above temperature 0 each drafter with sampled weights run with its greedy
    ones too (`<lane>_greedy_weights`)."""
    configs = {m: replace(common, method=m, drafts_per_step=drafts.get(m, GenerationConfig.drafts_per_step))
               for m in chosen}
    configs.update(variant_configs(configs))
    if common.temperature != 0:
        configs.update({f"{m}_greedy_weights": replace(configs[m], drafter_weights="greedy")
                        for m in engine.sampled_drafter_models if m in configs})
    return configs


class _Runs:
    """Every lane run on one prompt after another, interleaved (ours, and transformers' peers beside the baseline and
    the small LM): each lane's tally and per-position counts prompt by prompt, whether each wrote the baseline's
    tokens, and the mismatches where identity is owed."""

    def __init__(self, engine: Engine, configs: dict[str, GenerationConfig], drafts: dict[str, int], with_hf: bool):
        self.engine, self.configs, self.drafts, self.with_hf = engine, configs, drafts, with_hf
        self.greedy = configs[BASELINE].temperature == 0
        self.methods = list(configs)
        # transformers' assisted generation runs the small LM; it is the peer of our lane that runs the same.
        self.small_lm = next((m for m in self.methods if engine.drafter_kinds.get(m) is not None
                              and engine.drafter_kinds[m].name == "small-lm"), None)
        self.names = [*self.methods, *(["hf_generate"] if with_hf else []),
                      *(["hf_assisted"] if with_hf and self.small_lm else [])]
        # the pairs and the --by groups are read from these, prompt by prompt
        self.tallies: dict[str, list[_Tally]] = {name: [] for name in self.names}
        self.positions: dict[str, list[list]] = {m: [] for m in self.methods}
        self.identical: dict[str, list[bool]] = {name: [] for name in self.names}
        self.mismatches: list[tuple[str, str]] = []

    def one_prompt(self, prompt: str, tally: bool) -> None:
        results = {}
        for method in self.methods:
            results[method] = self.engine.generate(prompt, self.configs[method])
            if tally:
                self.tallies[method].append(_Tally())
                self.tallies[method][-1].add_run(results[method])
                self.positions[method].append(position_counts(results[method].steps))
            if self.with_hf and method in (BASELINE, self.small_lm):
                self._peer(prompt, method, results, tally)
        for method in self.methods:
            same = results[method].output_ids == results[BASELINE].output_ids
            if tally:
                self.identical[method].append(same)
            if self.greedy and not same:
                self.mismatches.append((method, prompt[:40]))

    def _peer(self, prompt: str, method: str, results: dict, tally: bool) -> None:
        """transformers' run beside ours: `generate` beside the baseline, assisted generation beside the small LM."""
        peer = "hf_generate" if method == BASELINE else "hf_assisted"
        assistant = self.engine.drafter_models[self.small_lm] if method == self.small_lm else None
        hf_ids, hf_s = _timed_hf_generate(self.engine, list(results[method].prompt_ids),
                                          self.configs[BASELINE].max_new_tokens, assistant,
                                          self.drafts.get(self.small_lm, 1))
        same = hf_ids == list(results[BASELINE].output_ids)
        if tally:
            self.tallies[peer].append(_Tally())
            self.tallies[peer][-1].add_timed(len(hf_ids), hf_s)
            self.identical[peer].append(same)
        if not same:
            self.mismatches.append((peer, prompt[:40]))

    def ratios(self, rows: dict) -> dict:
        """Ours against transformers' own: its wall time over ours, the baseline's and the small LM's."""
        ratios = {}
        if self.with_hf:
            ratios["baseline_vs_hf_generate"] = round(rows["hf_generate"]["wall_s"] / rows[BASELINE]["wall_s"], 3)
            if self.small_lm:
                ratios[f"{self.small_lm}_vs_hf_assisted"] = round(
                    rows["hf_assisted"]["wall_s"] / rows[self.small_lm]["wall_s"], 3)
        return ratios


def _pairs(names: list[str], configured: list[str], engine: Engine) -> list[tuple[str, str]]:
    """The pairs of lanes set against each other: every two lanes that are not a method's variant (the later lane
    over the earlier one: the baseline first, then transformers' runs, so ours are over theirs), and each variant over
    its own method."""
    own = engine.methods()
    variant_of = {name: max((m for m in own if name.startswith(m + "_")), key=len)
                  for name in configured if name not in own}
    main = sorted((n for n in names if n not in variant_of), key=lambda n: (n != BASELINE, not n.startswith("hf_")))
    return [(b, a) for i, a in enumerate(main) for b in main[i + 1:]] + list(variant_of.items())


class _Measured:
    """One bench run's per-prompt tallies, and what is read from any subset of its prompts."""

    def __init__(self, tallies: dict, positions: dict, identical: dict | None, pairs: list[tuple[str, str]]):
        self.tallies, self.positions, self.identical, self.pairs = tallies, positions, identical, pairs

    def summary(self, indices) -> dict:
        """The lanes' rows, the pairs' paired ratios and each lane's per-position acceptance over these prompts."""
        indices = list(indices)
        totals = {name: _Tally.total([t[i] for i in indices]) for name, t in self.tallies.items()}
        rows = {name: t.row(totals[BASELINE]) for name, t in totals.items()}
        for name, per_prompt in self.positions.items():
            counts: list[list[int]] = []
            for i in indices:
                counts = add_counts(counts, per_prompt[i])
            rows[name]["per_position_acceptance"] = [None if d == 0 else round(a / d, 3) for d, a in counts]
            rows[name]["per_position"] = position_rows(counts)
        speeds = {name: [t[i].tokens / t[i].wall_s if t[i].wall_s else 0.0 for i in indices]
                  for name, t in self.tallies.items()}
        return {"lanes": rows, "pairwise": pairwise(speeds, self.pairs)}

    def groups(self, labels: list[str]) -> dict:
        """summary over each label's prompts, the labels in first-seen order."""
        indices: dict[str, list[int]] = {}
        for i, label in enumerate(labels):
            indices.setdefault(label, []).append(i)
        return {label: {"num_prompts": len(chosen), **self.summary(chosen)} for label, chosen in indices.items()}

    def prompt_rows(self, label_rows: list[dict] | None) -> list[dict]:
        """One row per lane and prompt: its labels, tokens, time, speed and (our lanes) steps and acceptance."""
        rows = []
        for name, per_prompt in self.tallies.items():
            ours = name in self.positions
            for i, t in enumerate(per_prompt):
                row = {"lane": name, "origin": "local", "prompt_index": i}
                row.update({k: v for k, v in (label_rows[i] if label_rows else {}).items() if k != "prompt"})
                row.update(tokens=t.tokens, wall_s=round(t.wall_s, 5),
                           tokens_per_s=round(t.tokens / t.wall_s, 2) if t.wall_s else None,
                           prefill_s=round(t.prefill_s, 5) if ours else None, steps=t.steps if ours else None,
                           accepted=t.accepted if ours else None, verified=t.verified if ours else None,
                           identical=self.identical[name][i] if self.identical is not None else None)
                rows.append(row)
        return rows


def run_k_sweep(engine: Engine, prompts: list[str], max_new_tokens: int, ks=range(1, 9), method: str | None = None) -> dict:
    """The serial drafter's ceiling: speedup for K = 1..8 against the baseline (engine/measure/sweep.py). Speedup
    rises while acceptance pays for the extra draft forwards, peaks, then falls."""
    return k_sweep(engine, prompts, max_new_tokens, ks, method)


class BusyMachine:
    """A second process spinning on one core for as long as the `with` block lasts: the benchmark's
    "machine kept busy" condition (a student's browser, another job)."""

    def __enter__(self):
        import subprocess

        self.process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()


def format_table(report: dict) -> str:
    lines = [f"preset {report['preset']} on {report['device']}, {report['num_prompts']} prompts, "
             f"{report['max_new_tokens']} new tokens, AR K = {report['serial_k']}, "
             f"DFlash / DSpark {_blocks(report['drafts_per_block'])} per block, " + (
                 "greedy" if not report.get("temperature") else
                 f"temperature {report['temperature']:g} ({report['verify_rule']} rule, samples: not compared)"), "",
             "| lane | tokens/s | speedup | decode speedup | τ | α | verified acc. | draft cost | "
             "draft / verify / host / bubble s | per-position acceptance [95 % interval] n |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in report["lanes"].items():
        split = (f"{r['draft_s']:.2f} / {r['verify_s']:.2f} / {r['host_s']:.2f} / {r['bubble_s']:.2f}"
                 if "tau" in r else "—")
        cost = f"{r['draft_cost']:.2f}" if "tau" in r else "—"
        ppa = position_words(r["per_position"]) if "per_position" in r else "—"
        rate = f"{r['verified_acceptance'] * 100:.1f}%" if r.get("verified_acceptance") is not None else "—"
        decode = f"{r['decode_speedup']:.2f}×" if "decode_speedup" in r else "—"
        lines.append(f"| {name} | {r['tokens_per_s']:.1f} | {r['speedup']:.2f}× | {decode} | {r.get('tau', '—')} | "
                     f"{r.get('alpha', '—')} | {rate} | {cost} | {split} | {ppa} |")
    lines.append("")
    lines.append("draft cost = drafting time per step / verify time per step (a target forward); "
                 "bubble = wall time outside every span; decode speedup = the same ratio without each run's prefill "
                 "(time per output token after the first)")
    lines.append("")
    lines += ["", *pairwise_lines(report)]
    for name, value in report["ratios"].items():
        lines.append(f"{name}: {value:.2f}× (wall-time ratio, > 1 means ours is faster)")
    if report.get("calibration"):
        c = report["calibration"]
        lines.append(f"DSpark survival calibration error (ECE, held-out): {c['survival_ece_before']:.3f} before, "
                     f"{c['survival_ece_after']:.3f} after temperature scaling")
    overlaps = [(name, r) for name, r in report["lanes"].items() if "one_minus_tv" in r]
    if report.get("temperature") and overlaps:
        lines += ["", "| lane | judged drafts | expected acceptance (mean min(1, p/q)) | 1 − TV |", "|---|---|---|---|"]
        lines += [f"| {name} | {r['judged']} | {r['expected_acceptance']:.3f} | {r['one_minus_tv']:.3f} |"
                  for name, r in overlaps]
    lines.append(f"outputs identical across all lanes: {report['identical_outputs']}"
                 + ("" if not report.get("temperature") else " (not compared: samples)"))
    if report.get("k_sweep"):
        sweep = report["k_sweep"]
        lines += ["", f"K sweep of the {sweep['method']} lane ({sweep['drafter']}): best K = {sweep['best_k']}", "",
                  "| K | " + " | ".join(str(k) for k in sweep["rows"]) + " |",
                  "|---|" + "---|" * len(sweep["rows"]),
                  "| speedup | " + " | ".join(f"{r['speedup']:.2f}×" for r in sweep["rows"].values()) + " |",
                  "| τ | " + " | ".join(f"{r['tau']:.2f}" for r in sweep["rows"].values()) + " |"]
    if report.get("budget_sweep"):
        lines += ["", *budget_table(report["budget_sweep"])]
    return "\n".join(lines)


def drafting_summary(drafts: dict[str, int]) -> dict:
    """The file format's `serial_k` (the serial chains' drafts per step) and `drafts_per_block` (the one-pass
    chains': one number where they agree, else one per method) from each lane's drafts per step."""
    groups = {style: {m: n for m, n in drafts.items() if method_entry(m).drafting == style and not method_entry(m).tree}
              for style in ("serial", "one_pass")}
    one = {style: (next(iter(g.values())) if len(set(g.values())) == 1 else g or None) for style, g in groups.items()}
    return {"serial_k": one["serial"], "drafts_per_block": one["one_pass"]}


def _blocks(value) -> str:
    return ", ".join(f"{m} {n}" for m, n in value.items()) if isinstance(value, dict) else str(value)


def pairwise_lines(report: dict) -> list[str]:
    """The pairs of lanes, each one's paired speed ratio over prompts in words (a tie unless its interval excludes 1),
    the prompt file, and the same per --by group."""
    lines = []
    if report.get("prompts"):
        p = report["prompts"]
        lines.append(f"prompts: {p['path']} ({p['format']}, sha256 {p['sha256'][:16]}…, {p['prompts_used']} used)")
    lines += ["speed ratios, prompt by prompt (geometric mean of per-prompt ratios, 95 % paired t-interval on their "
              "logs; \"faster\" only where the interval excludes 1):",
              *(f"- {pair_words(row)}" for row in report.get("pairwise", ()))]
    lines.append(f"per-position acceptance: Wilson 95 % intervals; * marks a position with fewer than "
                 f"{report.get('min_drafts', MIN_DRAFTS)} drafts")
    by = report.get("by")
    for label, group in (by["groups"].items() if by else ()):
        lines += ["", f"{by['column']} = {label} ({group['num_prompts']} prompt{'s' * (group['num_prompts'] != 1)}):",
                  *(f"- {name}: {r['tokens_per_s']:.1f} tokens/s, {r['speedup']:.2f}×"
                    + (f", per-position {position_words(r['per_position'])}" if "per_position" in r else "")
                    for name, r in group["lanes"].items()),
                  *(f"- {pair_words(row)}" for row in group["pairwise"])]
    return lines


def budget_table(sweep: dict) -> list[str]:
    """The budget sweep as markdown: per tree lane, τ, speedup and the verify's time against the node budget,
    beside the chain it grows from."""
    budgets = sweep["budgets"]
    lines = [f"Node budget sweep ({sweep['num_prompts']} prompts, {sweep['max_new_tokens']} new tokens, "
             f"{sweep['device']})", "", "| lane | " + " | ".join(["chain", *map(str, budgets)]) + " |",
             "|---|" + "---|" * (len(budgets) + 1)]
    for tree, lane in sweep["lanes"].items():
        cells = [lane["chain_row"], *(lane["rows"][b] for b in budgets)]
        lines += [f"| {tree} speedup | " + " | ".join(f"{r['speedup']:.2f}×" for r in cells) + " |",
                  f"| {tree} τ | " + " | ".join(f"{r['tau']:.2f}" for r in cells) + " |",
                  f"| {tree} verify ms/step | " + " | ".join(f"{r['verify_ms_per_step']:.1f}" for r in cells) + " |",
                  f"| {tree} draft ms/step | " + " | ".join(f"{r['draft_ms_per_step']:.1f}" for r in cells) + " |"]
    for tree, lane in sweep["lanes"].items():
        lines.append(f"{tree}: best budget {lane['best_budget']}, {lane['draft_forwards_per_step']:g} draft forwards "
                     f"per step, depth {lane['drafts_per_step']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.measure.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default=DEFAULT_PRESET)
    parser.add_argument("--prompts", type=Path, default=DEFAULT_PROMPTS,
                        help="prompt file: .jsonl (a 'prompt' field, other fields labels), .csv (a 'prompt' column, "
                             "other columns labels) or plain text (one prompt a line); see docs/formats.md")
    parser.add_argument("--by", default=None, metavar="COLUMN",
                        help="also split every figure by this label of the prompt file")
    parser.add_argument("--csv", type=Path, default=None,
                        help="per-prompt rows as CSV (default: the --json path with .csv)")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N prompts (0 = all)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--drafts-per-step", type=str, default="serial=4", metavar="N | WHO=N,...",
                        help="tokens drafted per step: N for every lane, or per method or drafting style (serial, "
                             "one_pass), e.g. serial=4,one_pass=7 (default serial=4; a block drafter at its trained "
                             "block)")
    add_pair_arguments(parser)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto",
                        help="replay the target's verifies as CUDA graphs (auto: on the GPUs the device check passed on)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: the preset's; 1 for the embedded models)")
    parser.add_argument("--no-hf", action="store_true", help="skip the transformers peer runs")
    parser.add_argument("--k-sweep", action="store_true", help="also run the AR lane at K = 1..8 (its ceiling)")
    parser.add_argument("--methods", type=lambda v: [method_id(m.strip()) for m in v.split(",") if m.strip()],
                        default=None, help="comma-separated lanes to run (default: every lane; the baseline always runs)")
    parser.add_argument("--tree-nodes", type=int, default=GenerationConfig.tree_nodes,
                        help="node budget of the tree lanes (dflash_tree, eagle3_tree)")
    parser.add_argument("--budget-sweep", type=lambda v: [int(b) for b in v.split(",")], default=None,
                        metavar="B1,B2,...", help="also run every tree lane at these node budgets beside its chain")
    parser.add_argument("--requests-at-once", "--concurrency", dest="requests_at_once",
                        type=lambda v: [int(b) for b in v.split(",")], default=None,
                        metavar="B1,B2,...", help="instead: every batched lane with this many requests at once "
                        "(engine/measure/concurrency.py)")
    parser.add_argument("--lanes", type=lambda v: tuple(x.strip() for x in v.split(",") if x.strip()), default=None,
                        help=f"with --requests-at-once: these batched lanes (default: {','.join(BATCHED_LANES)}; "
                             f"{scheduled_method()}_verify_N verifies N)")
    parser.add_argument("--pairs", type=int, default=0, metavar="N",
                        help="with --requests-at-once: also N adjacent pairs of runs of DSpark's scheduler against DSpark "
                             "verifying everything at the largest B, their ratio with a 95 %% interval")
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a second process meanwhile")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0 (greedy, outputs compared with the baseline's) or above: every lane samples")
    parser.add_argument("--verify-rule", default="rejection", choices=["rejection", "match"],
                        help="the rule above temperature 0")
    parser.add_argument("--seed", type=int, default=0, help="every lane's seed above temperature 0")
    parser.add_argument("--json", type=Path, default=Path("runs/bench.json"))
    args = parser.parse_args(argv)
    try:
        label_rows = read_prompt_file(args.prompts)
        if args.limit > 0:
            label_rows = label_rows[: args.limit]
        if not label_rows:
            raise EngineError(f"no prompts in {args.prompts}")
        prompts = [row["prompt"] for row in label_rows]
        drafts_per_step = parse_drafts_per_step(args.drafts_per_step)  # one line, before the models load
        labels_of(label_rows, args.by)  # a missing label: one line, before the models load
        csv_path = args.csv or args.json.with_suffix(".csv")
        args.json.parent.mkdir(parents=True, exist_ok=True)  # a bad output path fails before the run
        check_requests_at_once(args.requests_at_once or [])  # before the models load
        if args.pairs < 0:
            raise EngineError(f"--pairs is how many pairs of runs to make: 0 or more, got {args.pairs}")
        for lane in args.lanes or ():
            lane_config(lane, 1)  # an unknown lane: one line, before the models load
        engine, form, ran = load_pair_or_preset(args, device=args.device, threads=args.threads,
                                                cuda_graphs=args.cuda_graphs)
        prompts = [form(p) for p in prompts]
        if args.requests_at_once:
            return _concurrency(engine, prompts, args)
        with BusyMachine() if args.busy else contextlib.nullcontext():
            report = run_bench(engine, prompts, args.max_new_tokens, drafts_per_step,
                               with_hf=not args.no_hf, temperature=args.temperature, verify_rule=args.verify_rule,
                               seed=args.seed, methods=args.methods, tree_nodes=args.tree_nodes,
                               label_rows=label_rows, by=args.by)
            report["prompts"] = prompt_file_record(args.prompts, len(prompts))
            report.update(ran)
            if ran["models"]:  # your own checkpoints: the weights measured are theirs
                report["weights"] = {role: m["weights_sha256"] for role, m in ran["models"].items()}
            if args.k_sweep:
                report["k_sweep"] = run_k_sweep(engine, prompts, args.max_new_tokens)
            if args.budget_sweep:
                report["budget_sweep"] = budget_sweep(engine, prompts, args.max_new_tokens, args.budget_sweep)
        report["busy_machine"] = args.busy
    except (EngineError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(report))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    csv_path.write_text(rows_csv(report["prompt_rows"]), encoding="utf-8")
    print(f"wrote {args.json} and {csv_path} (per-prompt rows)")
    return 0 if report["identical_outputs"] else 1


def _concurrency(engine: Engine, prompts: list[str], args) -> int:
    engine.warm_up()
    with BusyMachine() if args.busy else contextlib.nullcontext():
        lanes = (BASELINE, *(lane for lane in args.lanes if lane != BASELINE)) if args.lanes else BATCHED_LANES
        sweep = concurrency_sweep(engine, prompts, args.max_new_tokens, args.requests_at_once, lanes,
                                  pairs=args.pairs)
    report = {"concurrency": sweep, "device": engine.device_name, "preset": engine.preset, "busy_machine": args.busy,
              "date": time.strftime("%Y-%m-%d")}
    print("\n".join(concurrency_table(sweep)))
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0 if sweep["identical_outputs"] else 1


if __name__ == "__main__":
    sys.exit(main())
