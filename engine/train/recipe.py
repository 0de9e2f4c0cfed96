"""How a shipped model was trained, read from its training.json: every phase in order (steps, data, labels), and
the totals of steps, tokens seen and minutes. The model card prints it, so that each drafter's budget stands beside
the others' (a lane must never look worse for a smaller budget).

A record keeps the record of the weights it started from under "earlier" (a drafter trained on from the shipped one),
and a `--from-shipped` round its own phases under "more"; each record's phases are the train configs it names.
"""

from __future__ import annotations

# A record's phases in the order the stages run them (engine/train/__main__.py): the first phase, then the target's
# growth and unlikelihood, or a drafter's phases on the target's own continuations, its greedy phase and (a `--matched`
# run) its self-distillation on the target's greedy and sampled rows.
PHASES = ("train_config", "grow_phase", "phase", "unloop_phase", "self_data_phase", "second_cycle",
          "second_self_data_phase", "greedy_phase", "self_distill_phase")


def _oldest_first(record: dict) -> list[dict]:
    chain = [record]
    while isinstance(chain[0].get("earlier"), dict):
        chain.insert(0, chain[0]["earlier"])
    return chain


def _data(phase: dict, rows: str | None) -> str:
    """What a phase trained on: the rows it or its record names, else its share of the target's own continuations (the
    rest corpus text)."""
    if rows:
        return rows
    share = phase.get("self_data_fraction", 0.0) or 0.0
    if share == 0:
        return "corpus"
    if share == 1:
        return "the target's continuations"
    return f"corpus and the target's continuations ({share:.0%})"


def _named_rows(entry: dict) -> str | None:
    """The rows a phase or record names ("runs/greedy.pt (2048 greedy) and ..."); a count of rows (the target's
    unlikelihood phase keeps how many it generated) names none."""
    rows = entry.get("rows")
    return rows if isinstance(rows, str) else None


def phases(record: dict) -> list[dict]:
    """Every phase the weights went through, oldest first: steps, tokens (steps × batch × length), data, labels."""
    out = []
    for rec in _oldest_first(record):
        for source in (rec, rec.get("more") or {}):
            for key in PHASES:
                phase = source.get(key)
                if not isinstance(phase, dict) or "steps" not in phase:
                    continue
                first = source is rec and key == "train_config"  # the record's own labels and rows describe it
                labels = phase.get("labels") or (rec.get("labels") if first else None)
                tokens = phase["steps"] * phase.get("batch_size", 0) * phase.get("seq_len", 0)
                rows = _named_rows(phase) or (_named_rows(rec) if first else None)
                out.append({"steps": phase["steps"], "tokens": tokens, "labels": labels, "data": _data(phase, rows)})
    return out


def recipe(record: dict) -> dict:
    """A model's phases and totals (steps, tokens seen, minutes of training on the machine that trained it)."""
    steps = phases(record)
    return {"phases": steps, "steps": sum(p["steps"] for p in steps), "tokens": sum(p["tokens"] for p in steps),
            "minutes": record.get("train_minutes")}


def recipe_text(entry: dict) -> str:
    """One line for the card: each phase as "steps: data (labels)", joined by arrows."""
    return " → ".join(f"{p['steps']}: {p['data']}" + (f" ({p['labels']})" if p["labels"] else "")
                      for p in entry["phases"])
