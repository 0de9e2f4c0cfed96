"""Where the breakout is and is not: each lane's τ and speedup within each kind of held-out text (regular code, free
code, prose-like: scripts/label_prompts.py), each with its 95 % interval over that kind's prompts, read from the
temperature sweep's `by_kind` (engine/measure/sweep.py kind_rows). A table for the page (Markdown), and one sentence
worded from it: on which kind a one-pass lane's lead over AR is largest, whether that lead is larger than the noise
(the two lanes paired prompt by prompt), and whether that agrees with the papers. A
recording without kinds gives nothing: no table, no sentence. Points 1, 7 and 9 show it on the page; their slides
keep their charts.
Torch-free and Gradio-free."""

from __future__ import annotations

from engine.contract.methods import DFLASH, DSPARK, EAGLE3, METHOD_REGISTRY, method_label

KIND_ORDER = ("regular code", "free code", "prose-like")  # any other kind a file names follows, by name
PREDICTABLE = "regular code"  # the kind nearest the papers' predictable text: its continuation near-forced
PAPERS = "one pass's lead largest on predictable text (GSM8K against MT-Bench)"
# The page's table: the two ends of the sweep. The slides show none: at 1024×768 a table under a slide's chart
# leaves the chart under its height (tests/browser/test_slides.py)
PAGE_TEMPERATURES = ("0.0", "1.0")
# Each point's lanes: AR beside the one-pass lane(s) it discusses (point 1: every chain lane the sweep measured)
POINT_LANES = {7: (EAGLE3, DFLASH), 9: (EAGLE3, DFLASH, DSPARK)}
POINT_LEADERS = {1: (DFLASH, DSPARK), 7: (DFLASH,), 9: (DSPARK,)}
KIND_POINTS = tuple(POINT_LEADERS)  # the points that show τ and speedup by kind


def _temperatures(data: dict) -> dict:
    item = data.get("temperatures")
    sweep = item.get("data") if isinstance(item, dict) else None
    return sweep.get("temperatures", {}) if isinstance(sweep, dict) else {}


def kind_cells(data: dict, lanes=None, temperatures=("0.0",)) -> dict:
    """{(temperature, lane): {kind: {"prompts", "tau", "speedup"}}} for each lane (default every lane the sweep
    measured that the registry names) at each temperature whose row has `by_kind`; {} for a recording without."""
    sweep = _temperatures(data)
    cells = {}
    for temperature in temperatures:
        rows = sweep.get(temperature, {}).get("lanes", {})
        for lane in (lanes if lanes is not None else [m for m in rows if m in METHOD_REGISTRY]):
            by_kind = rows.get(lane, {}).get("by_kind")
            if by_kind:
                cells[(temperature, lane)] = by_kind
    return cells


def kinds_in(cells: dict) -> list[str]:
    """The kinds the cells name, in KIND_ORDER, any other after them by name."""
    named = {kind for by_kind in cells.values() for kind in by_kind}
    return [k for k in KIND_ORDER if k in named] + sorted(named - set(KIND_ORDER))


def _interval(value: dict, unit: str = "", prompts: int = 2) -> str:
    """"2.31× (2.10–2.50)": a figure with its interval over prompts; over one prompt there is none to give."""
    if prompts < 2:
        return f"{value['mean']:.2f}{unit}"
    return f"{value['mean']:.2f}{unit} ({value['low']:.2f}–{value['high']:.2f})"


def _cell(cell: dict | None) -> str:
    if not cell:
        return "—"
    return f"τ {_interval(cell['tau'], '', cell['prompts'])}, {_interval(cell['speedup'], '×', cell['prompts'])}"


def _header(cells: dict, kinds: list[str]) -> list[str]:
    counts = {kind: max(c[kind]["prompts"] for c in cells.values() if kind in c) for kind in kinds}
    return [f"{kind} ({counts[kind]} prompt{'s' * (counts[kind] != 1)})" for kind in kinds]


def _rows(cells: dict, kinds: list[str]) -> list[list[str]]:
    return [[f"{float(t):g}", method_label(lane), *(_cell(by_kind.get(kind)) for kind in kinds)]
            for (t, lane), by_kind in cells.items()]


def point_lanes(number: int):
    """The lanes point `number` shows by kind (None: every lane the sweep measured)."""
    return POINT_LANES.get(number)


def kinds_markdown(data: dict, number: int) -> str:
    """Point `number`'s table for the page: τ and speedup by kind, each with its 95 % interval, at T = 0 and 1 ("" for a
    recording without kinds)."""
    cells = kind_cells(data, point_lanes(number), PAGE_TEMPERATURES) if number in KIND_POINTS else {}
    if not cells:
        return ""
    kinds = kinds_in(cells)
    lines = ["| T | lane | " + " | ".join(_header(cells, kinds)) + " |", "|---|---|" + "---|" * len(kinds)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(cells, kinds)]
    return ("**By kind of text** (the held-out prompts of the temperature sweep; τ and speedup against the baseline, "
            "95 % interval over the kind's prompts):\n\n" + "\n".join(lines))


def leads(data: dict, lane: str, temperature: str = "0.0") -> dict[str, dict]:
    """`lane`'s speed over AR's within each kind: {kind: {"mean"[, "low", "high"]}}. Where the recording paired the
    two lanes prompt by prompt (kind_rows' "vs"), that ratio with its 95 % interval over the kind's prompts; in an
    older recording, the ratio of the two lanes' speedups alone. {} without both lanes' kinds."""
    cells = kind_cells(data, (lane, EAGLE3), (temperature,))
    own, ar = cells.get((temperature, lane)), cells.get((temperature, EAGLE3))
    if not own or not ar:
        return {}
    found = {}
    for kind in kinds_in(cells):
        if kind not in own or kind not in ar:
            continue
        paired = (own[kind].get("vs") or {}).get(EAGLE3)
        if paired:
            found[kind] = dict(paired) if own[kind]["prompts"] >= 2 else {"mean": paired["mean"]}
        elif ar[kind]["speedup"]["mean"]:
            found[kind] = {"mean": own[kind]["speedup"]["mean"] / ar[kind]["speedup"]["mean"]}
    return found


def _lead(value: dict) -> str:
    """"1.37× (1.20–1.55)": a lead over AR with its paired interval where there is one."""
    return _interval(value, "×") if "low" in value else f"{value['mean']:.2f}×"


def _noise(value: dict) -> str:
    """Whether a paired lead is larger than the noise between prompts ("" without an interval)."""
    if "low" not in value:
        return ""
    if value["low"] > 1:
        return ", paired over its prompts: a lead beyond the noise"
    if value["high"] < 1:
        return ", paired over its prompts: AR faster beyond the noise"
    return ", paired over its prompts: within the noise"


def kinds_sentence(data: dict, number: int) -> str:
    """Point `number`'s sentence from the numbers: on which kind each of its one-pass lanes leads AR most at T = 0 (with
    whether that lead is beyond the noise, where the recording paired the lanes), and whether that agrees with the
    papers ("" for a recording without kinds)."""
    parts, agree, differ = [], [], []
    for lane in POINT_LEADERS.get(number, ()):
        lead = leads(data, lane)
        if len(lead) < 2:
            continue
        best = max(lead, key=lambda kind: lead[kind]["mean"])
        others = ", ".join(f"{_lead(lead[k])} on {k}" for k in lead if k != best)
        parts.append(f"{method_label(lane)}'s lead over AR is largest on {best} ({_lead(lead[best])} AR's speed"
                     f"{_noise(lead[best])}; against {others})")
        (agree if best == PREDICTABLE else differ).append(method_label(lane))
    if not parts:
        return ""
    papers = f"the papers, which find {PAPERS}"
    if not differ:
        verdict = f"this agrees with {papers}, {PREDICTABLE} being the most predictable text here"
    elif not agree:
        verdict = f"this does not agree with {papers}, which here would be {PREDICTABLE}"
    else:
        verdict = (f"{' and '.join(agree)} agree{'s' * (len(agree) == 1)} with {papers}; {' and '.join(differ)} "
                   f"do{'es' * (len(differ) == 1)} not ({PREDICTABLE} is the most predictable text here)")
    return f"By kind of text at T = 0, {'; '.join(parts)}: {verdict}."
