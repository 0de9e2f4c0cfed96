"""A comparison as one JSON document: every lane's trace, the settings, the device and the versions.

`Comparison` and `LaneResult` are the one value every view of the app draws from: the lanes' HTML, every
chart, the step-through, the Why tab's overlay, the download. Written by the Compare tab after a run
("Download this comparison"), read back to show a run without running any model (the Compare tab's "Open
a saved comparison", the Step-through tab). Torch-free.
"""

from __future__ import annotations

import gc
import json
import math
import re
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from statistics import median

from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_id
from engine.contract.summary import per_position_acceptance, per_position_ceiling, summarize
from engine.contract.types import MAX_TREE_NODES, STOPPED, RunSummary, Step

try:  # Gradio's own JSON reader, twice as fast as json's; json reads whatever it does not (see _parse)
    import orjson
except ImportError:  # pragma: no cover - installed with gradio
    orjson = None

from .links import control_name
from .settings import LATER_CONTROLS, SettingError, parse_controls

FORMAT = "speclab-comparison/1"
MAX_FILE_BYTES = 10_000_000  # a 512-token comparison of all seven lanes, the trees at 64 nodes, is about 7 MB
MAX_WORD_CHARS = 200  # a device name, preset, drafter label or version read from a file is cut to this
MAX_TIMING_RUNS = 100  # a saved lane claiming more timing runs than this reads as one
# What a saved file's numbers must stay within for the views to draw them as measurements: a span's times (a
# day: the app stops a comparison after 180 s), a lane's shortest wall and compute time (a microsecond, so
# tokens per second stay a number of a few digits), a lane's speedup over the baseline either way.
MAX_SPAN_S = 86_400.0
MIN_LANE_S = 1e-6
MAX_SPEEDUP = 1_000.0
# A lane's rate, live or in a timing run: far beyond any measured here (the embedded models write about 100 tokens/s
# alone on 2 CPU cores; a GPU batch of 32 requests a few thousand), so a file claiming more is not a measurement.
MAX_TOKENS_PER_S = 200_000.0
RATIO_SLACK = 1e-4  # float32 arithmetic in the engine against float64 here
# A lane whose decoding thread computed less than this share of its wall time ran on a busy machine: other work took
# the cores it needed, and its chips say so (docs/hosting.md). Alone on these two cores a lane computes 0.95-0.98
# of its wall time (the lesson's recordings); one core lent to other work halves it.
BUSY_SHARE = 0.8
# A lane whose live pass took more than SERVER_BUSY_S on the clock beyond its engine run, and whose engine run was
# under SERVER_BUSY_SHARE of that pass, ran while the server was busy with other requests: the page was slow to take
# and draw its steps (alone, a lane's engine run is 0.97-1.00 of its live pass; beside ten visitors toggling
# projector mode in a loop, 0.14-0.26: docs/hosting.md), and its chips say so.
SERVER_BUSY_SHARE = 0.5
SERVER_BUSY_S = 1.0


# Which of a lane's rates each clock divides: its summary's field, and its column in a timing run's rates.
RATES = {"compute": "tokens_per_cpu_s", "wall": "tokens_per_s", "batch": "batch_tokens_per_s"}
RATE_COLUMNS = {"compute": 0, "wall": 1, "batch": 2}


class RecordError(ValueError):
    """A file that is not a comparison SpecLab can show; its message is one clear line."""


@dataclass(frozen=True)
class LaneResult:
    """One lane of a comparison: which method ran, with which drafter, its steps (the prefill first) and its
    summary, computed once, when the lane ended (or when a saved file was read)."""

    method: str
    steps: tuple[Step, ...]
    drafter: str = ""  # which drafter served the method, in words
    state: str = "done"  # done, stopped, recorded, or "error: ..."; "running" while it runs (no summary yet)
    summary: RunSummary | None = None
    timing_runs: int = 1  # complete runs measured; each step as timed in the fastest of them (app/run/runner.py)
    # each timing run's own (tokens per compute second or None, tokens per wall second[, the batch's tokens per wall
    # second, for a request among others]), in the order they ran (app/run/runner.py run_rates)
    run_rates: tuple = ()
    # of its live pass on the clock, the share its engine run took (app/run/runner.py LaneEvent; None: not measured)
    engine_share: float | None = None

    @classmethod
    def ended(cls, method: str, steps, drafter: str = "", state: str = "done", timing_runs: int = 1,
              run_rates=(), engine_share: float | None = None) -> "LaneResult":
        steps = tuple(steps)
        return cls(method, steps, drafter, state, summarize(list(steps)) if steps else None, timing_runs,
                   tuple(tuple(r) for r in run_rates), engine_share)

    @cached_property
    def per_position_acceptance(self) -> tuple[float | None, ...]:
        return per_position_acceptance(list(self.steps))

    @cached_property
    def per_position_ceiling(self) -> tuple[float | None, ...]:
        """Mean 1 − TV per position: the rejection rule's acceptance, predicted (engine/contract/summary.py)."""
        return per_position_ceiling(list(self.steps))


@dataclass(frozen=True)
class Comparison:
    """One comparison: its settings and every lane, with where and with what it was measured."""

    settings: dict  # app.links.Settings as a dict (settings_dict), checked when read from a file
    lanes: dict[str, LaneResult]  # method -> its lane, in display order
    device: str = ""
    preset: str = ""
    versions: dict = field(default_factory=dict)
    recorded_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    # server lane -> its answer's figures, each the server's own report (app/servers/claims.py lane_figures)
    servers: dict = field(default_factory=dict)

    @classmethod
    def of_steps(cls, settings: dict, steps: dict[str, list[Step]], drafters: dict[str, str] | None = None,
                 **where) -> "Comparison":
        """A comparison of finished lanes given as {method: steps}."""
        drafters = drafters or {}
        return cls(settings, {m: LaneResult.ended(m, s, drafters.get(m, "")) for m, s in steps.items()}, **where)

    @property
    def steps(self) -> dict[str, tuple[Step, ...]]:
        return {m: lane.steps for m, lane in self.lanes.items()}

    @property
    def greedy(self) -> bool:
        return self.settings.get("temperature") == 0

    @property
    def rule(self) -> str:
        """The verification rule that judged the drafts: "greedy" at temperature 0, else the settings' rule."""
        return "greedy" if self.greedy else str(self.settings.get("verify_rule", "rejection"))

    @property
    def baseline(self) -> LaneResult | None:
        lane = self.lanes.get(BASELINE)
        return lane if lane is not None and lane.summary is not None else None

    @property
    def busy(self) -> bool:
        """Whether each lane decoded its prompt among other requests, one batch (requests at once above 1)."""
        return (self.settings.get("requests_at_once") or 1) > 1

    @property
    def clock(self) -> str:
        """Which rate the speedups divide: "compute" (tokens per second of the decoding threads' CPU time, on the
        CPU: a second process on the machine does not stretch it) when every lane has it, else "wall". A busy
        server's run (`busy`) is read as the Lesson's load measurement reads it, "batch": the whole batch's new
        tokens per second of wall time (this request's and its companions'), over the baseline's batch at the same
        load: a server's throughput, which one request's latency or one thread's CPU time does not give. (A busy
        run saved without the batch's tokens reads by wall time.)"""
        ended = [lane.summary for lane in self.lanes.values() if lane.summary is not None]
        if self.busy:
            return "batch" if ended and all(s.batch_tokens_per_s for s in ended) else "wall"
        return "compute" if ended and all(s.tokens_per_cpu_s for s in ended) else "wall"

    def speedup(self, method: str, clock: str | None = None) -> float | None:
        """The lane's speed over the baseline lane's, both measured in this comparison, on `clock` ("compute",
        "wall" or "batch"; default: the comparison's own, see `clock`). With two or more timing rounds that both
        lanes have, the median of the rounds' own speedups (`round_speedups`), so it always lies within their
        spread (`speedup_spread`); else the lane's tokens per second over the baseline's."""
        rounds = self.round_speedups(method, clock)
        if len(rounds) > 1:
            return median(rounds)
        lane, base = self.lanes.get(method), self.baseline
        if lane is None or lane.summary is None or base is None:
            return None
        rate = RATES[clock or self.clock]
        mine, theirs = getattr(lane.summary, rate), getattr(base.summary, rate)
        return mine / theirs if mine and theirs else None

    def round_speedups(self, method: str, clock: str | None = None) -> list[float]:
        """Each timing round's own speedup: the lane's run over the baseline's run of the same round (the lanes
        take turns, so a round's runs ran close in time), on `clock`; empty without the runs' figures."""
        lane, base = self.lanes.get(method), self.baseline
        if lane is None or base is None or method == BASELINE:
            return []
        column = RATE_COLUMNS[clock or self.clock]
        return [mine[column] / theirs[column] for mine, theirs in zip(lane.run_rates, base.run_rates)
                if len(mine) > column and len(theirs) > column and mine[column] and theirs[column]]

    def timed_rounds(self, method: str, clock: str | None = None) -> int | None:
        """How many timing rounds stand behind the lane's speedup on `clock`: its rounds with the baseline
        (`round_speedups`), 1 for a lane and a baseline each timed once, None where it cannot be said (the
        baseline itself; a file giving each step's fastest timing over several runs, not the runs' own figures).
        The chips and the status line both read it, so they cannot disagree on how many runs there were."""
        lane, base = self.lanes.get(method), self.baseline
        if lane is None or lane.summary is None or base is None or method == BASELINE:
            return None
        rounds = len(self.round_speedups(method, clock))
        if rounds:
            return rounds
        return 1 if lane.timing_runs == 1 and base.timing_runs == 1 else None

    def cpu_share(self, method: str) -> float | None:
        """The share of its wall time the lane's decoding thread spent computing (its compute seconds over its wall
        seconds), the median over its timing runs (else its kept steps'): near 1 with a core to itself, lower when
        other work on the machine took the cores. None without compute time (a GPU, a file without it)."""
        lane = self.lanes.get(method)
        if lane is None or lane.summary is None:
            return None
        shares = [wall / compute for compute, wall, *_ in lane.run_rates if compute and wall]
        if not shares and lane.summary.tokens_per_cpu_s and lane.summary.tokens_per_s:
            shares = [lane.summary.tokens_per_s / lane.summary.tokens_per_cpu_s]
        return median(shares) if shares else None

    def machine_busy(self, method: str) -> float | None:
        """The lower CPU share (`cpu_share`) of this lane and the baseline when it is under BUSY_SHARE: the machine
        was busy with other work while they ran, so their speedup was measured on stretched time. None when both had
        the cores they needed (or it cannot be said)."""
        shares = [share for m in dict.fromkeys((method, BASELINE)) if (share := self.cpu_share(m)) is not None]
        return min(shares) if shares and min(shares) < BUSY_SHARE else None

    def server_busy(self, method: str) -> float | None:
        """The lower engine share (`LaneResult.engine_share`) of this lane and the baseline when the server was busy
        with other requests while they ran live: under SERVER_BUSY_SHARE, with the live pass more than SERVER_BUSY_S
        longer on the clock than the engine's run (so a run of a few steps, where starting one costs its share, is
        not called busy). None when both kept up (or it cannot be said: a recording without the shares)."""
        shares = []
        for m in dict.fromkeys((method, BASELINE)):
            lane = self.lanes.get(m)
            if lane is None or lane.summary is None or not lane.engine_share:
                continue
            extra_s = lane.summary.wall_s * (1 / lane.engine_share - 1)  # its live pass beyond its engine run
            if lane.engine_share < SERVER_BUSY_SHARE and extra_s > SERVER_BUSY_S:
                shares.append(lane.engine_share)
        return min(shares) if shares else None

    def speedup_spread(self, method: str, clock: str | None = None) -> tuple[float, float] | None:
        """The lowest and highest of the rounds' own speedups (`round_speedups`), on `clock`: the range the
        headline speedup (their median) is drawn from. None with fewer than two rounds that both lanes have (a
        recording without them, a lane timed once)."""
        ratios = self.round_speedups(method, clock)
        return (min(ratios), max(ratios)) if len(ratios) > 1 else None

    def differs_from_baseline(self, method: str) -> int | None:
        """At temperature 0, computed from the tokens: 0 when the lane wrote exactly the baseline lane's tokens,
        else the position (from 1) of the first token that differs. None where it cannot be said: a temperature
        above 0 (each lane draws its own sample), no baseline lane, or a lane that did not run to its end."""
        lane, base = self.lanes.get(method), self.baseline
        if not self.greedy or lane is None or base is None or method == BASELINE or lane.summary is None:
            return None
        if STOPPED in (lane.summary.finish_reason, base.summary.finish_reason):
            return None
        mine, theirs = output_ids(lane.steps), output_ids(base.steps)
        if mine == theirs:
            return 0
        return next((i + 1 for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)) + 1)

    @property
    def timing_runs(self) -> int:
        """The fewest complete runs behind any lane's figures (each step keeps its fastest timing)."""
        return min((lane.timing_runs for lane in self.lanes.values()), default=1)

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "settings": self.settings, "device": self.device, "preset": self.preset,
                           "versions": self.versions, "recorded_at": self.recorded_at,
                           "drafters": {m: lane.drafter for m, lane in self.lanes.items()},
                           "timing_runs": {m: lane.timing_runs for m, lane in self.lanes.items()},
                           "run_rates": {m: [list(r) for r in lane.run_rates] for m, lane in self.lanes.items()},
                           "engine_share": {m: lane.engine_share for m, lane in self.lanes.items()
                                            if lane.engine_share is not None},
                           "lanes": {m: [s.to_dict() for s in lane.steps] for m, lane in self.lanes.items()},
                           **({"servers": self.servers} if self.servers else {})},
                          ensure_ascii=False)


def verify_cost(comparison, method: str) -> float | None:
    """How many baseline forwards one of the lane's verify forwards cost in this comparison: its mean verify time
    per step over the baseline lane's (each baseline step is one target forward of one token). None without a
    baseline or a step."""
    lane, base = comparison.lanes.get(method), comparison.baseline
    if lane is None or lane.summary is None or base is None:
        return None
    s, b = lane.summary, base.summary
    if not s.num_steps or not s.verify_s or not b.num_steps or not b.verify_s:
        return None
    return (s.verify_s / s.num_steps) / (b.verify_s / b.num_steps)


def output_ids(steps) -> list[int]:
    """The tokens a lane wrote, in order."""
    return [t.id for step in steps for t in step.committed]


def _with_finish_reason(steps: list[Step], max_new_tokens: int) -> list[Step]:
    """A lane saved before steps carried why a run ended: one that wrote max_new_tokens ended on length;
    any other reads as stopped (the file cannot say whether it met end-of-text or the context's end)."""
    if not steps or steps[-1].finish_reason is not None:
        return steps
    written = sum(len(s.committed) for s in steps)
    return steps[:-1] + [replace(steps[-1], finish_reason="length")] if written >= max_new_tokens else steps


def _lane_steps(method: str, items) -> list[Step]:
    """One lane's steps, each checked (engine/contract/types.py Step.from_dict): the prefill, then decode steps
    numbered 1, 2, ... in order."""
    if not isinstance(items, list):
        raise ValueError(f"lane {method} is not a list of steps")
    trace = [Step.from_dict(item) if isinstance(item, dict) else None for item in items]
    if any(step is None for step in trace):
        raise ValueError(f"lane {method} holds something that is not a step")
    if not trace or trace[0].kind != "prefill":
        raise ValueError(f"lane {method} does not start with its prefill")
    for i, step in enumerate(trace):
        if step.index != i or (i > 0 and step.kind != "decode"):
            raise ValueError(f"lane {method}: step {i} is numbered {step.index}, kind {step.kind}")
    return trace


def too_large(size: int) -> str:
    """The one line for a file over MAX_FILE_BYTES, in the units a person reads a file's size in."""
    return (f"the file is {size / 1e6:,.1f} MB; a saved comparison is at most {MAX_FILE_BYTES / 1e6:g} MB "
            f"({MAX_FILE_BYTES:,} bytes)")


_pause_lock = threading.Lock()
_pause = {"readers": 0, "resume": False}


@contextmanager
def collector_paused():
    """Python's cycle collector held off while a file is read: reading one makes hundreds of thousands of small
    objects (each token, its top-k, its step) and no cycle, and the collector walked everything alive again and again
    as they were made (half a large file's read). Readers in several threads share one pause; the collector runs
    again when the last ends (if it ran before), what was made meanwhile counted as old (gc.freeze, gc.unfreeze:
    all to the oldest generation, none walked), else young collections walk it again (a third of drawing it)."""
    with _pause_lock:
        if _pause["readers"] == 0:
            _pause["resume"] = gc.isenabled()
            gc.disable()
        _pause["readers"] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause["readers"] -= 1
            if _pause["readers"] == 0 and _pause["resume"]:
                gc.freeze()
                gc.unfreeze()
                gc.enable()


def read_comparison(data: bytes | str, size: int | None = None) -> Comparison:
    """Parse and check a saved comparison; anything malformed or oversized raises RecordError (one line).
    size: the whole file's size in bytes, where `data` is only its first MAX_FILE_BYTES + 1 bytes."""
    if len(data) > MAX_FILE_BYTES:
        raise RecordError(too_large(max(size or 0, len(data))))
    with collector_paused():
        return read_parsed(parse_file(data))


# Each byte as the shape of a number: a digit 0, a point itself, else x. An integer past 64 bits shows as x and 20
# zeros; a float as json writes it never does (at most 16 digits before its point; those after it follow the point).
_SHAPES = bytes(0x30 if 0x30 <= b <= 0x39 else b if b == 0x2E else 0x78 for b in range(256))
_LONG_INTEGER = b"0" * 20


def _parse(data: bytes | str):
    """The file's JSON: by orjson (UTF-8, standard JSON; twice json's speed), else by json (NaN, other encodings,
    nesting past 1,024, broken JSON, and integers past 64 bits, which orjson reads as floats): the same values, or
    the same error, as json alone."""
    if orjson is None:
        return json.loads(data)
    try:
        encoded = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    except UnicodeEncodeError:  # a lone surrogate: json's to read
        return json.loads(data)
    shape = encoded.translate(_SHAPES)
    if not shape.startswith(_LONG_INTEGER) and b"x" + _LONG_INTEGER not in shape:
        try:
            return orjson.loads(encoded)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


@collector_paused()
def parse_file(data: bytes | str):
    """A file's JSON value (RecordError, one line, for anything that is not JSON); `read_parsed` reads it."""
    try:
        return _parse(data)
    except RecursionError:
        raise RecordError("the file nests its values too deeply to be a comparison") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"not a JSON file ({str(exc).splitlines()[0]})") from None


@collector_paused()
def read_parsed(doc) -> Comparison:
    """A saved comparison's JSON value (`parse_file`) read and checked; RecordError (one line) for anything else.
    Read inside `collector_paused` with the parse, so the collector does not walk the parsed values in between."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RecordError(f"not a SpecLab comparison (expected \"format\": \"{FORMAT}\")")
    doc = {key: _current_method_ids(value) if key in METHOD_KEYED else value for key, value in doc.items()}
    lanes = doc.get("lanes")
    if not isinstance(lanes, dict) or not lanes:
        raise RecordError("the comparison has no lanes")
    unknown = [m for m in lanes if m not in METHOD_REGISTRY]
    if unknown:
        raise RecordError(f"unknown method {unknown[0]!r} in the file")
    try:
        steps = {m: _lane_steps(m, lanes[m]) for m in METHOD_REGISTRY if m in lanes}
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise RecordError(f"a step in the file is malformed ({type(exc).__name__}: {str(exc)[:100]})") from None
    if not isinstance(doc.get("settings"), dict):
        raise RecordError("the comparison has no settings")
    try:  # checked like the page's own controls, so every reader of a comparison can trust its settings
        settings = settings_dict(parse_controls({**LATER_CONTROLS,
                                                 **{control_name(k): v for k, v in doc["settings"].items()}}))
    except SettingError as exc:
        raise RecordError(f"the comparison's settings are invalid: {exc}") from None
    except KeyError as exc:
        raise RecordError(f"the comparison's settings lack {exc}") from None
    drafters, runs, rates = _words(doc.get("drafters")), _counts(doc.get("timing_runs")), _rates(doc.get("run_rates"))
    shares = _shares(doc.get("engine_share"))
    drafters = {m: drafter_words(label) for m, label in drafters.items()}
    lanes = {m: LaneResult.ended(m, _with_finish_reason(trace, settings["max_new_tokens"]), drafters.get(m, ""),
                                 "recorded", runs.get(m, 1), rates.get(m, ()), shares.get(m))
             for m, trace in steps.items()}
    comparison = Comparison(settings=settings, lanes=lanes, device=_word(doc.get("device")),
                            preset=_word(doc.get("preset")), versions=_words(doc.get("versions")),
                            recorded_at=_word(doc.get("recorded_at")), servers=_servers(doc.get("servers")))
    check_consistent(comparison)
    return comparison


def _verdict_problem(token, rule: str, first_sibling: bool = True) -> str | None:
    """Why a judged drafted token's verdict does not follow from its own numbers under `rule`, or None. The
    engine writes accept_prob as min(1, p_target / p_draft) under the rejection rule (the draw r decides:
    accepted when r < accept_prob), p_target under the match rule, and 1 or 0 at temperature 0 (argmax). A tree
    node after its row's first child is judged against what its earlier siblings left of p and q (engine/tree.py),
    which the file does not hold: only its draw is checked against its accept_prob."""
    accepted, a, r = token.verdict == "accepted", token.accept_prob, token.draw
    if a is None:
        return None
    if rule == "greedy":
        if r is not None or a not in (0.0, 1.0) or accepted != (a == 1.0):
            return f"is {token.verdict} at temperature 0 with accept_prob {a:g} and draw {r}"
    elif rule == "rejection":
        if r is not None and accepted != (r < a):
            return f"is {token.verdict} with the draw {r:g} against accept_prob {a:g}"
        if first_sibling and token.target_prob is not None and token.draft_prob > 0 \
                and abs(a - min(1.0, token.target_prob / token.draft_prob)) > RATIO_SLACK:
            return (f"has accept_prob {a:g}, not min(1, p_target / p_draft) = "
                    f"{min(1.0, token.target_prob / token.draft_prob):g}")
    elif token.target_prob is not None and (r is not None or abs(a - token.target_prob) > RATIO_SLACK):
        return f"has accept_prob {a:g} under the match rule, not its p_target {token.target_prob:g}"
    return None


def _spans_problem(lane: LaneResult) -> str | None:
    for step in lane.steps:
        for span in step.spans:
            if max(span.end_s, span.cpu_s or 0.0) > MAX_SPAN_S:
                return f"has a span at {max(span.end_s, span.cpu_s or 0.0):.3g} s, more than a day"
    for step in lane.steps:  # a tree deeper than the engine drafts would cost the views its depth squared
        if step.parents is not None and len(step.drafted) > MAX_TREE_NODES:
            return f"step {step.index} has a tree of {len(step.drafted):,} drafted tokens, more than {MAX_TREE_NODES}"
    s = lane.summary  # a run too short to be one first: its rate would be the symptom, not the cause
    rates = [r for pair in lane.run_rates for r in pair if r] + [
        r for r in (s.tokens_per_s, s.batch_tokens_per_s) if r] if s is not None else []
    if s is not None and s.num_new_tokens and (s.wall_s < MIN_LANE_S or (s.cpu_s is not None and s.cpu_s < MIN_LANE_S)):
        return f"wrote {s.num_new_tokens} tokens in {min(s.wall_s, s.cpu_s or s.wall_s):.3g} s, less than a microsecond"
    if rates and max(rates) > MAX_TOKENS_PER_S:
        return f"claims {max(rates):,.0f} tokens/s, more than any run here could write ({MAX_TOKENS_PER_S:,.0f})"
    return None


def _later_siblings(parents) -> set[int]:
    """The nodes of a tree step (index into its drafted tokens) that have an earlier sibling; none for a chain."""
    seen, later = set(), set()
    for node, parent in enumerate(parents or ()):
        if parent in seen:
            later.add(node)
        seen.add(parent)
    return later


def check_consistent(comparison: Comparison) -> None:
    """What the views take from a saved comparison without looking again, checked against its own numbers
    (RecordError, one line): each judged draft's verdict follows from its probabilities and draw under the
    comparison's rule, every time is one a run can take, every speedup is within MAX_SPEEDUP either way.
    ("identical to the baseline" is never read from a file: it is computed from the tokens.)"""
    for method, lane in comparison.lanes.items():
        problem = _spans_problem(lane)
        if problem:
            raise RecordError(f"lane {method} {problem}: not a measurement")
        for step in lane.steps:
            later = _later_siblings(step.parents)
            for position, token in enumerate(step.drafted, start=1):
                if token.verdict in ("accepted", "rejected"):
                    problem = _verdict_problem(token, comparison.rule, position - 1 not in later)
                    if problem:
                        raise RecordError(f"lane {method}, step {step.index}: drafted token {position} {problem}")
    for method in comparison.lanes:
        for clock in RATES:
            ratio = comparison.speedup(method, clock)
            if ratio is not None and not 1 / MAX_SPEEDUP <= ratio <= MAX_SPEEDUP:
                raise RecordError(f"lane {method} claims {ratio:.3g}× the baseline's speed ({clock} time); a "
                                  f"measured speedup is within {MAX_SPEEDUP:g}× either way")


_ANCHORED_BLOCK = re.compile(r"\bblock (\d+) = anchor \+ (\d+) drafts\b")
_BARE_BLOCK = re.compile(r"\bblock (\d+)\b(?! =)")


def drafter_words(label: str) -> str:
    """A drafter's label in the lane headers' one block convention, "N drafts per block" (engine/drafters/dflash.py
    block_words), whatever the recording says: an older file's "block 8 = anchor + 7 drafts" reads "7 drafts
    per block", and its "block 7" of a drafter whose block holds no anchor (DSpark, DeepSpec's format) "7 drafts per
    block"."""
    label = _ANCHORED_BLOCK.sub(lambda m: f"{m.group(2)} drafts per block", label)
    return _BARE_BLOCK.sub(lambda m: f"{m.group(1)} drafts per block", label)


def _word(value) -> str:
    """A descriptive field (device, preset, a version): text, cut short; anything else reads as empty."""
    return value[:MAX_WORD_CHARS] if isinstance(value, str) else ""


METHOD_KEYED = ("lanes", "drafters", "timing_runs", "run_rates", "engine_share")  # the file's tables keyed by method


def _current_method_ids(table):
    """A {method: ...} table with legacy method ids (a file saved before a method was renamed) under today's."""
    return {method_id(k): v for k, v in table.items()} if isinstance(table, dict) else table


def _words(value) -> dict[str, str]:
    """A small table of descriptive fields ({method: drafter}, {package: version}); anything else is empty."""
    if not isinstance(value, dict):
        return {}
    return {k[:MAX_WORD_CHARS]: _word(v) for k, v in list(value.items())[:32] if isinstance(k, str)}


def _rate(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e9 else None


def _rates(value) -> dict[str, tuple]:
    """{method: each timing run's (tokens per compute second or None, per wall second[, the batch's tokens per wall
    second or None])} (a run among other requests has the third; files saved before it, not); a malformed entry
    reads as none (the speedup is then shown without its spread)."""
    if not isinstance(value, dict):
        return {}
    found = {}
    for method, runs in list(value.items())[:32]:
        if not isinstance(method, str) or not isinstance(runs, list) or len(runs) > MAX_TIMING_RUNS:
            continue
        pairs = [tuple(_rate(x) for x in r) for r in runs if isinstance(r, list) and len(r) in (2, 3)]
        if len(pairs) == len(runs) and all(rates[1] is not None for rates in pairs):
            found[method] = tuple(pairs)
    return found


def _servers(value) -> dict[str, dict]:
    """A file's server lanes, each kept as the server's report: short words, finite numbers, lists of counts."""
    if not isinstance(value, dict):
        return {}

    def plain(v):
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, (int, float)):
            return v if math.isfinite(v) else None
        if isinstance(v, str):
            return v[:MAX_WORD_CHARS]
        if isinstance(v, list):
            return [plain(x) for x in v[:64] if isinstance(x, (int, float, str)) and not isinstance(x, bool)]
        return None

    return {_word(name): {_word(k): plain(v) for k, v in list(figures.items())[:40]}
            for name, figures in list(value.items())[:16] if isinstance(figures, dict)}


def _shares(value) -> dict[str, float]:
    """{method: engine share}: numbers above 0 up to 1; anything else reads as not measured."""
    if not isinstance(value, dict):
        return {}
    return {k: float(v) for k, v in list(value.items())[:32] if isinstance(k, str) and not isinstance(v, bool)
            and isinstance(v, (int, float)) and 0 < v <= 1}


def _counts(value) -> dict[str, int]:
    """{method: timing runs}: whole numbers from 1 to MAX_TIMING_RUNS; anything else reads as one run."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in list(value.items())[:32] if isinstance(k, str) and not isinstance(v, bool)
            and isinstance(v, int) and 1 <= v <= MAX_TIMING_RUNS}


def settings_dict(settings) -> dict:
    """app.links.Settings (a frozen dataclass) as plain JSON values."""
    d = asdict(settings)
    d["methods"] = list(d["methods"])
    return d
