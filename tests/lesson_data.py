"""Small made-up comparisons for the tests of words chosen from numbers: every lane a list of steps with the
counts and times a test asks for, so a test can feed rising numbers and then falling ones."""

from __future__ import annotations

from app.comparison import Comparison
from engine.contract.types import CommittedToken, DraftedToken, Span, Step

SETTINGS = {"prompt": "def f(x):", "methods": [], "temperature": 0.0, "seed": 0, "max_new_tokens": 64,
            "drafts_per_step_serial": 4, "drafts_per_step_one_pass": 7, "verify_rule": "rejection",
            "scheduler": "throughput", "confidence_threshold": 0.5, "overlap": "auto"}


def _token(i: int, verdict: str, tv: float | None) -> DraftedToken:
    return DraftedToken(i, f"t{i}", verdict, 0.5, 0.5, 1.0 if verdict == "accepted" else 0.0, None, (), (), None, tv)


def lane(pattern, draft_ms: float, verify_ms: float, gap_ms: float = 0.0, tv: float | None = None) -> list[Step]:
    """A lane's steps: the prefill, then one step per (drafted, accepted) in `pattern`, each drafting for
    draft_ms, verifying for verify_ms, then idle for gap_ms (a bubble); every span's CPU time is its length."""
    def span(work, start, length):
        return Span(work, start / 1e3, (start + length) / 1e3, "", length / 1e3)

    steps = [Step(0, "prefill", (), 0, 0, 0, (CommittedToken(0, "p", "bonus"),), (span("verify", 0.0, verify_ms),))]
    now = verify_ms
    for index, (drafted, accepted) in enumerate(pattern, start=1):
        tokens = tuple(_token(j, "accepted" if j < accepted else "rejected" if j == accepted else "unverified", tv)
                       for j in range(drafted))
        committed = tuple(CommittedToken(j, f"t{j}", "accepted") for j in range(accepted)) + \
            (CommittedToken(99, "b", "bonus"),)
        spans = ((span("draft", now, draft_ms),) if drafted else ()) + (span("verify", now + draft_ms, verify_ms),)
        steps.append(Step(index, "decode", tokens, drafted, accepted, 99, committed, spans))
        now += draft_ms + verify_ms + gap_ms
    return steps


def comparison(lanes: dict[str, list[Step]], **settings) -> Comparison:
    return Comparison.of_steps({**SETTINGS, "methods": list(lanes), **settings}, lanes, device="cpu (test)")


def baseline(steps: int = 40, verify_ms: float = 10.0) -> list[Step]:
    return lane([(0, 0)] * steps, 0.0, verify_ms)
