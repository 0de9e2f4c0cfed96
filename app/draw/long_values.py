"""A long-output measurement's values as the chart, its table and the lesson's words read them: plain dicts in, no
plotly (the lesson, and the recorders on a machine without plotly, import this alone)."""

from __future__ import annotations


def long_lanes(item: dict | None) -> dict[tuple[str, str], dict]:
    """(method, option) -> its lane, of a long-output measurement ({} without one)."""
    lanes = ((item or {}).get("data") or {}).get("lanes") or []
    return {(lane["method"], lane["option"]): lane for lane in lanes if isinstance(lane, dict)}


def tau_text(cell: dict | None) -> str:
    tau = (cell or {}).get("tau")
    return "–" if not tau else f"{tau['mean']:.2f} ({tau['low']:.2f}–{tau['high']:.2f})"


def tau_mean(cell: dict | None) -> str:
    tau = (cell or {}).get("tau")
    return "–" if not tau else f"{tau['mean']:.2f}"


def train_share(lane: dict) -> float:
    seconds = lane.get("seconds") or {}
    return seconds.get("train", 0.0) / seconds["wall"] if seconds.get("wall") else 0.0
