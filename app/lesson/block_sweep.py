"""The block sweep in words: every one-pass lane's speedup and τ at each block up to the one its drafter was trained
on, at temperature 0 and at 1 (engine/measure/lesson.py blocks; recorded only). A table and two sentences under the
Why tab's K sweep: where a one-pass lane is fastest, beside where a serial lane's best K lies. The Compare tab's block
control starts at these blocks (app/blocks.py). Torch-free and Gradio-free."""

from __future__ import annotations

from engine.contract.methods import method_label

TEMPERATURE_WORDS = {"0.0": "temperature 0", "1.0": "temperature 1"}


def block_rows(item: dict | None) -> dict[str, dict[str, dict]]:
    """{temperature: {lane: {"rows": {k: row}, "best": k, "trained": k, "drafter"}}} from the recording ({} without):
    "best" is the sweep's own best block (k_sweep's best_k), "trained" the longest it measured."""
    data = (item or {}).get("data") or {}
    found = {}
    for temperature, lanes in (data.get("temperatures") or {}).items():
        found[temperature] = {}
        for lane, sweep in lanes.items():
            rows = {int(k): row for k, row in sweep["rows"].items()}
            found[temperature][lane] = {"rows": rows, "best": int(sweep["best_k"]), "trained": max(rows),
                                        "drafter": sweep.get("drafter", "")}
    return found


def _fastest(lane: str, r: dict, tolerance: float) -> str:
    """"DSpark at 8 drafts (1.67×; level with it: 15 at 1.64×)", or "…; at its trained 15: 0.99×" where the trained
    block is further from the fastest than `tolerance` (relative: two speedups closer read as level)."""
    best, trained, rows = r["best"], r["trained"], r["rows"]
    top = rows[best]["speedup"]
    level = [k for k in sorted(rows) if k != best and rows[k]["speedup"] >= top * (1 - tolerance)]
    words = f"{method_label(lane)} at {best} draft{'s' * (best != 1)} ({top:.2f}×"
    if level:
        words += "; level with it: " + ", ".join(f"{k} at {rows[k]['speedup']:.2f}×" for k in level)
    if best != trained and trained not in level:
        words += f"; at its trained {trained}: {rows[trained]['speedup']:.2f}×"
    return words + ")"


def blocks_sentences(item: dict | None, sweeps: dict | None = None) -> str:
    """Where each one-pass lane measured fastest at each temperature, and which blocks measured level with it (within
    the recording's tolerance: speed.speed_tolerance), worded from the recording, beside the K sweep's best K for a
    serial lane ("" without the recording)."""
    from .speed import speed_tolerance

    rows = block_rows(item)
    tolerance = speed_tolerance((item or {}).get("data") or {})
    said = []
    for temperature, lanes in rows.items():
        if lanes:
            fastest = ", ".join(_fastest(lane, r, tolerance) for lane, r in lanes.items())
            said.append(f"At {TEMPERATURE_WORDS.get(temperature, 'temperature ' + temperature)} the fastest block "
                        f"was: {fastest}.")
    if not said:
        return ""
    serial = [f"{method_label(m)}'s best K is {s['best_k']}" for m, s in (((sweeps or {}).get("data") or {})
                                                                          .get("sweeps") or {}).items()]
    contrast = (f" In the serial lanes' K sweep, {' and '.join(serial)}: a serial draft pays one forward per token, "
                "a one-pass block about the same for any length.") if serial else ""
    return (" ".join(said) + contrast + " The Compare tab's block control starts at the fastest block for the run's "
            "temperature.")


def blocks_markdown(item: dict | None, sweeps: dict | None = None, recorded: str = "recorded") -> str:
    """The block sweep for the Why tab: where it was recorded (`recorded`: lesson.recorded_words), the sentences and a
    table of speedup and τ by block ("" without the recording)."""
    rows = block_rows(item)
    blocks = sorted({k for lanes in rows.values() for r in lanes.values() for k in r["rows"]})
    if not blocks:
        return ""
    data = item["data"]
    first = next(iter(next(iter(data["temperatures"].values())).values()))
    lines = ["| T | lane | " + " | ".join(str(k) for k in blocks) + " |", "|---|---|" + "---|" * len(blocks)]
    for temperature, lanes in rows.items():
        for lane, r in lanes.items():
            cells = [(f"**{r['rows'][k]['speedup']:.2f}×**" if k == r["best"] else f"{r['rows'][k]['speedup']:.2f}×")
                     + f", τ {r['rows'][k]['tau']:.2f}" if k in r["rows"] else "—" for k in blocks]
            lines.append(f"| {float(temperature):g} | {method_label(lane)} | " + " | ".join(cells) + " |")
    return (f"**Drafts per block, one-pass lanes** ({recorded}; {first['num_prompts']} held-out prompts, "
            f"{first['max_new_tokens']} new tokens, {data.get('rounds', 1)} run(s) each, speedup over the target alone "
            f"at the same temperature and seed, the fastest in bold). {blocks_sentences(item, sweeps)}\n\n"
            + "\n".join(lines))
