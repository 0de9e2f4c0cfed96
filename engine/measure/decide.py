"""Numbers that can decide between two lanes: per-prompt rows, paired speed ratios with their intervals, per-position
acceptance with its counts, and the prompt file they came from.

- A pair of lanes ran the same prompts, so each prompt gives one ratio of their speeds (tokens / wall second). The
  pair's figure is the geometric mean of those ratios, with a 95 % interval from Student's t over the per-prompt log
  ratios (n − 1 degrees of freedom): a paired t-interval, so whatever makes one prompt slow for both lanes cancels.
  One lane is called faster only where the interval excludes 1; otherwise the pair is a tie.
- Per-position acceptance: at position k, the drafts that reached it (verified there, every earlier position
  accepted) and how many were accepted, with the Wilson score interval at 95 %. It treats each draft as
  independent; drafts of one prompt are not, so read it as a floor on the uncertainty. A position reached by fewer
  than MIN_DRAFTS drafts is marked `few`.

Torch-free (stdlib only): the app and the serving lane's command line use it too.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

from ..contract.types import EngineError
from ..contract.summary import position_counts
from .sweep import t_critical

MIN_DRAFTS = 20  # fewer drafts than this at a position: its acceptance is marked as resting on too few
Z_975 = 1.959964
PROMPT_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv"}  # anything else: plain text


# --- the prompt file -----------------------------------------------------------------------------------------

def read_prompt_file(path: Path) -> list[dict]:
    """Every prompt of a prompt file as {"prompt": text, label: value, ...}, in file order.

    Three forms, by the file's suffix: `.jsonl` (or `.json`): one JSON object a line with a "prompt" string, every
    other field a label; `.csv`: a header row naming a "prompt" column, every other column a label; anything else:
    plain text, one prompt a non-empty line, no labels. A malformed file is one EngineError line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EngineError(f"cannot read prompt file {str(path)!r}: {getattr(exc, 'strerror', None) or exc}") from None
    text = text.removeprefix("\ufeff")  # a spreadsheet's byte-order mark is not part of the first prompt or column
    kind = PROMPT_FORMATS.get(path.suffix.lower(), "text")
    if kind == "text":
        return [{"prompt": line} for line in text.splitlines() if line.strip()]
    if kind == "csv":
        reader = csv.DictReader(io.StringIO(text))
        if "prompt" not in (reader.fieldnames or ()):
            raise EngineError(f"{path}: a CSV prompt file needs a 'prompt' column, found {reader.fieldnames or 'none'}")
        return [{k: v for k, v in row.items() if k is not None} for row in reader if (row.get("prompt") or "").strip()]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise EngineError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise EngineError(f"{path}:{number}: each line needs a \"prompt\" string")
        rows.append(row)
    return rows


def prompt_file_record(path: Path, used: int) -> dict:
    """What a report says of its prompt file: the path, its form, the sha256 of its bytes, the prompts used."""
    path = Path(path)
    return {"path": str(path), "format": PROMPT_FORMATS.get(path.suffix.lower(), "text"),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "prompts_used": used}


def labels_of(rows: list[dict], column: str | None) -> list[str] | None:
    """Each prompt's value in `column` as text (None without a column); one EngineError line where a prompt
    has none."""
    if column is None:
        return None
    missing = [i for i, row in enumerate(rows) if row.get(column) in (None, "")]
    if missing:
        raise EngineError(f"--by {column}: prompt {missing[0] + 1} (of {len(rows)}) has no {column!r} label"
                          + ("" if column == "prompt" else f"; its fields: {', '.join(rows[missing[0]])}"))
    return [str(row[column]) for row in rows]


# --- paired ratios ---------------------------------------------------------------------------------------------

def paired_ratio(a: list[float], b: list[float]) -> dict:
    """Lane a's speed over lane b's, prompt by prompt (a[i] and b[i] the two speeds on prompt i): the geometric mean
    ratio and its 95 % paired t-interval; `verdict` is "a faster", "b faster", "tie", or "too few prompts"."""
    logs = [math.log(x / y) for x, y in zip(a, b) if x > 0 and y > 0]
    n = len(logs)
    if not n:
        return {"ratio": None, "low": None, "high": None, "prompts": 0, "verdict": "too few prompts"}
    mean = sum(logs) / n
    if n < 2:
        return {"ratio": round(math.exp(mean), 4), "low": None, "high": None, "prompts": 1,
                "verdict": "too few prompts"}
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_critical(n - 1) * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    verdict = "a faster" if low > 1 else "b faster" if high < 1 else "tie"
    return {"ratio": round(math.exp(mean), 4), "low": round(low, 4), "high": round(high, 4), "prompts": n,
            "verdict": verdict}


def pairwise(speeds: dict[str, list[float]], pairs: list[tuple[str, str]] | None = None) -> list[dict]:
    """paired_ratio for every pair of lanes (each lane's per-prompt speeds, the same prompts in the same order), or
    for `pairs`; each row names its lanes and the faster one in `faster` (None for a tie)."""
    names = list(speeds)
    pairs = pairs or [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    rows = []
    for a, b in pairs:
        row = {"a": a, "b": b, **paired_ratio(speeds[a], speeds[b])}
        row["faster"] = a if row["verdict"] == "a faster" else b if row["verdict"] == "b faster" else None
        rows.append(row)
    return rows


def pair_words(row: dict) -> str:
    """One pair in words: who is faster and by how much, or a tie, always with its interval."""
    if row["low"] is None:
        return f"{row['a']} / {row['b']}: too few prompts for an interval ({row['prompts']})"
    span = f"{row['ratio']:.3f}× (95 % interval {row['low']:.3f}–{row['high']:.3f}, {row['prompts']} prompts)"
    if row["faster"] is None:
        return f"{row['a']} / {row['b']}: tie, {span}"
    return f"{row['a']} / {row['b']}: {row['faster']} faster, {span}"


# --- per-position acceptance ---------------------------------------------------------------------------------------

def wilson(accepted: int, drafts: int) -> tuple[float, float] | tuple[None, None]:
    """The Wilson score interval at 95 % for accepted out of drafts."""
    if not drafts:
        return None, None
    p, z2 = accepted / drafts, Z_975 ** 2
    centre = (p + z2 / (2 * drafts)) / (1 + z2 / drafts)
    half = Z_975 * math.sqrt(p * (1 - p) / drafts + z2 / (4 * drafts ** 2)) / (1 + z2 / drafts)
    return max(0.0, centre - half), min(1.0, centre + half)


def add_counts(total: list[list[int]], more: list[list[int]]) -> list[list[int]]:
    """Two position_counts lists summed position by position."""
    out = [list(c) for c in total]
    for k, (drafts, accepted) in enumerate(more):
        if k < len(out):
            out[k] = [out[k][0] + drafts, out[k][1] + accepted]
        else:
            out.append([drafts, accepted])
    return out


def position_rows(counts: list[list[int]], min_drafts: int = MIN_DRAFTS) -> list[dict]:
    """Per position: drafts, accepted, the rate, its Wilson interval, and `few` where drafts < min_drafts."""
    rows = []
    for k, (drafts, accepted) in enumerate(counts, 1):
        low, high = wilson(accepted, drafts)
        rows.append({"position": k, "drafts": drafts, "accepted": accepted,
                     "rate": round(accepted / drafts, 4) if drafts else None,
                     "low": None if low is None else round(low, 4), "high": None if high is None else round(high, 4),
                     "few": drafts < min_drafts})
    return rows


def position_words(rows: list[dict]) -> str:
    """Per-position acceptance in one cell: rate [low–high] n, a `*` marking too few drafts."""
    return ", ".join("—" if r["rate"] is None else
                     f"{r['rate']:.2f} [{r['low']:.2f}–{r['high']:.2f}] n={r['drafts']}{'*' if r['few'] else ''}"
                     for r in rows) or "—"


# --- per-prompt rows as CSV ---------------------------------------------------------------------------------------

def rows_csv(rows: list[dict]) -> str:
    """Per-prompt rows as CSV: the union of their fields, in first-seen order; lists written as JSON."""
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    return out.getvalue()
