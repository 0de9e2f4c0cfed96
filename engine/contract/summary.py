"""Run statistics from the per-step trace: plain Python, no torch, so the app can call it on a run in
progress (the status line) as well as the engine on a finished one. The trace is all they need: why a run
ended travels on its last step."""

from __future__ import annotations

from dataclasses import replace

from .types import STOPPED, RunSummary, Step


def _work_total(steps: list[Step], work: str) -> float:
    return sum(span.end_s - span.start_s for step in steps for span in step.spans if span.work == work)


def busy_time(steps: list[Step]) -> float:
    """Length of the union of all spans: time in which some work ran (spans overlap under overlap)."""
    intervals = sorted((span.start_s, span.end_s) for s in steps for span in s.spans)
    total, current_start, current_end = 0.0, None, None
    for start, end in intervals:
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def position_counts(steps: list[Step]) -> list[list[int]]:
    """[[drafts that reached position k, of them accepted], ...] for k = 1, 2, …: a chain's position k (a tree's depth
    k) reached when the verify got that far and every earlier position was accepted."""
    decode = [s for s in steps if s.kind == "decode"]
    longest = max((s.reach for s in decode), default=0)
    counts = []
    for k in range(1, longest + 1):
        reached = [s for s in decode if s.reach >= k and s.num_accepted >= k - 1]
        counts.append([len(reached), sum(s.num_accepted >= k for s in reached)])
    return counts


def per_position_acceptance(steps: list[Step]) -> tuple[float | None, ...]:
    """P(position k accepted | positions 1..k-1 accepted), over the steps that verified position k."""
    return tuple(accepted / reached if reached else None for reached, accepted in position_counts(steps))


def acceptance_rate(steps: list[Step]) -> float | None:
    """The acceptance rate: accepted drafted tokens over the drafted tokens the rule judged (sent to the target,
    up to and including each step's first rejection; None when none was judged). The lesson's point 3, the lane
    chip and the per-position chart use this one definition (app/glossary.py)."""
    judged = sum(s.num_judged for s in steps)
    return sum(s.num_accepted for s in steps) / judged if judged else None


def summarize(steps: list[Step]) -> RunSummary:
    """Summary of the steps seen so far (the prefill first). A trace whose last step says no finish reason
    was stopped (or is still running)."""
    decode = [s for s in steps if s.kind == "decode"]
    output_ids = [t.id for s in steps for t in s.committed]
    wall_s = max((span.end_s for s in steps for span in s.spans), default=0.0)
    num_steps = len(decode)
    finish = (steps[-1].finish_reason if steps else None) or STOPPED
    cpu = [span.cpu_s for s in steps for span in s.spans]
    cpu_s = sum(cpu) if cpu and None not in cpu else None
    batch = [s.batch_tokens for s in steps]
    batch_tokens = sum(batch) if batch and None not in batch else None
    return RunSummary(
        num_new_tokens=len(output_ids),
        num_steps=num_steps,
        alpha=sum(s.num_accepted for s in decode) / num_steps if num_steps else 0.0,
        tau=sum(len(s.committed) for s in decode) / num_steps if num_steps else 0.0,
        wall_s=wall_s,
        tokens_per_s=len(output_ids) / wall_s if wall_s > 0 else 0.0,
        prefill_s=sum(span.end_s - span.start_s for s in steps if s.kind == "prefill" for span in s.spans),
        draft_s=_work_total(decode, "draft"),
        verify_s=_work_total(decode, "verify"),
        host_s=_work_total(decode, "host"),
        bubble_s=max(0.0, wall_s - busy_time(steps)),
        finish_reason=finish,
        cpu_s=cpu_s,
        tokens_per_cpu_s=len(output_ids) / cpu_s if cpu_s else None,
        batch_tokens_per_s=batch_tokens / wall_s if batch_tokens is not None and wall_s > 0 else None,
    )


def per_position_ceiling(steps: list[Step]) -> tuple[float | None, ...]:
    """Mean 1 − TV(p, q) at each position k over the tokens judged there (those that reached it): under the
    rejection rule each passes with probability exactly 1 − TV, so this is what per_position_acceptance
    measures, predicted from the two distributions alone. None where no judged token carries a distance."""
    decode = [s for s in steps if s.kind == "decode" and s.parents is None]  # chains: one judged token per position
    longest = max((s.num_verified for s in decode), default=0)
    ceilings = []
    for k in range(1, longest + 1):
        tvs = [s.drafted[k - 1].tv for s in decode if s.num_verified >= k and s.num_accepted >= k - 1
               and s.drafted[k - 1].tv is not None]
        ceilings.append(1.0 - sum(tvs) / len(tvs) if tvs else None)
    return tuple(ceilings)


def step_cost_s(step: Step, previous_end_s: float) -> float:
    """What one step cost: its spans' CPU time where the trace has it (the CPU), else the wall time from the
    previous step's end to its own (its bubble included)."""
    cpu = [span.cpu_s for span in step.spans]
    if cpu and None not in cpu:
        return sum(cpu)
    return max((span.end_s for span in step.spans), default=previous_end_s) - previous_end_s


def _ends(steps: list[Step]) -> list[float]:
    """Each step's last span end, running (a step without spans ends where the one before it did)."""
    ends, last = [], 0.0
    for step in steps:
        last = max((span.end_s for span in step.spans), default=last)
        ends.append(last)
    return ends


def fastest_steps(runs: list[list[Step]]) -> list[Step]:
    """One trace from several runs of the same tokens: each step as timed in the run where it cost least
    (`step_cost_s`), its spans moved so the steps follow one another as they did in their own runs (each keeps
    the gap before it). Every span is a measured one; what is chosen is, step by step, the least disturbed of
    its measurements: a moment in which something else held the core slows one step of one run, not the figure."""
    ends = [_ends(run) for run in runs]
    out, now = [], 0.0
    for i, steps in enumerate(zip(*runs)):
        previous = [run_ends[i - 1] if i else 0.0 for run_ends in ends]
        r = min(range(len(runs)), key=lambda j: step_cost_s(steps[j], previous[j]))
        shift = now - previous[r]
        step = steps[r]
        out.append(replace(step, spans=tuple(replace(span, start_s=span.start_s + shift, end_s=span.end_s + shift)
                                             for span in step.spans)))
        now = ends[r][i] + shift
    return out
