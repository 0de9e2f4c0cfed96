"""What a server says about its own speculative decoding, checked: counts that cannot be (more tokens accepted than
drafted, a rate outside 0–1, τ below 1, a count that is negative or not a number) are named, one short phrase each,
and the figures they touch are shown as the server's claim rather than as a measurement.

Plain functions of app/servers/client.py's results (SpecFigures for one answer, ServerCounters for a server's
/metrics); the page (lanes.py), the serving lane's command line (measure.py) and the About tab use them.
"""

from __future__ import annotations

import math

from .client import ServerCounters, SpecFigures

CLAIM = "the server's claim"


def _bad(value) -> bool:
    return value is not None and (not math.isfinite(value) or value < 0)


def _count_problems(named: dict) -> list[str]:
    return [f"{name} is {value:g}" for name, value in named.items() if _bad(value)]


def _rate_problems(named: dict) -> list[str]:
    return [f"{name} {value:g} is outside 0–1" for name, value in named.items()
            if value is not None and math.isfinite(value) and not 0 <= value <= 1]


def _tau_problems(named: dict) -> list[str]:
    return [f"{name} {value:g} is below 1" for name, value in named.items()
            if value is not None and math.isfinite(value) and value < 1]


def counter_problems(c: ServerCounters) -> list[str]:
    """Everything a server's /metrics counters say that cannot be true; empty when they hold together."""
    problems = _count_problems({"drafts": c.num_drafts, "drafted tokens": c.num_draft_tokens,
                                "accepted tokens": c.num_accepted, "acceptance rate": c.accept_rate,
                                "accept length": c.accept_length})
    problems += _count_problems({f"accepted at position {i}": v for i, v in enumerate(c.accepted_per_pos, 1)})
    if not problems:
        problems += _order_problems(c)
    problems += _rate_problems({"acceptance rate": c.acceptance_rate})
    problems += _tau_problems({"accept length": c.accept_length})
    return problems


def _order_problems(c: ServerCounters) -> list[str]:
    """Counts that are numbers but out of order: more accepted than drafted, anywhere."""
    problems = []
    if c.num_accepted is not None and c.num_draft_tokens is not None and c.num_accepted > c.num_draft_tokens:
        problems.append(f"accepted {c.num_accepted:g} > drafted {c.num_draft_tokens:g}")
    if c.num_drafts is not None and c.num_draft_tokens is not None and c.num_draft_tokens < c.num_drafts:
        problems.append(f"drafted tokens {c.num_draft_tokens:g} < drafts {c.num_drafts:g}")
    for i, accepted in enumerate(c.accepted_per_pos, 1):
        cap = (c.drafted_per_pos[i - 1] if len(c.drafted_per_pos) == len(c.accepted_per_pos) else c.num_drafts)
        if cap is not None and accepted > cap:
            problems.append(f"accepted at position {i} {accepted:g} > {cap:g} drafted there")
    return problems


def figure_problems(s: SpecFigures) -> list[str]:
    """The same checks for one answer's figures (vLLM's are also checked against its histogram on reading)."""
    problems = _count_problems({"the reported τ": s.reported_tau, "the reported rate": s.reported_rate})
    if s.num_drafted is not None and s.num_accepted > s.num_drafted:
        problems.append(f"accepted {s.num_accepted} > drafted {s.num_drafted}")
    problems += _rate_problems({"the reported rate": s.reported_rate})
    problems += _tau_problems({"the reported τ": s.reported_tau})
    return problems


def percent(value: float | None) -> str:
    """A share as a percentage; "—" when there is none, and the value's own words when it is not a number."""
    if value is None:
        return "—"
    if not math.isfinite(value):
        return "not a number" if math.isnan(value) else "infinite"
    return f"{value * 100:.0f}%"


def number(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return "not a number" if math.isnan(value) else "infinite"
    return f"{value:.{digits}f}"


def lane_figures(lane) -> dict:
    """One server lane's answer as a comparison file keeps it (its "servers" block): what this client measured and
    what the server counted, every figure the server's own report, with the checks' findings."""
    spec = lane.spec
    figures = {"source": "server", "shown_as": CLAIM, "kind": lane.kind, "state": lane.state, "error": lane.error,
               "tokens": lane.num_tokens, "tokens_per_s": lane.tokens_per_s, "ttft_s": lane.ttft_s,
               "tpot_s": lane.tpot_s, "timing_from": lane.timing_from}
    if spec is not None:
        figures.update(steps=spec.num_steps, accepted=spec.num_accepted, drafted=spec.num_drafted, tau=spec.tau,
                       acceptance_rate=spec.acceptance_rate, reported_tau=spec.reported_tau,
                       reported_rate=spec.reported_rate,
                       histogram=None if spec.histogram is None else list(spec.histogram),
                       problems=figure_problems(spec))
    return figures
