"""Plain values that cross the engine boundary: the run configuration, the per-step trace, the result.

Everything here is frozen and holds only Python scalars, strings, tuples and dicts, so the app (which
imports no torch) and the JSON writer can use it as it is.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from .methods import DEFAULT_METHOD, METHOD_REGISTRY
from .presets import DRAFTER_WEIGHTS, PROPOSALS, SCHEDULERS, VERIFY_RULES

MAX_DRAFTS = 16
MAX_TREE_NODES = 64  # a tree draft's node budget: what one verify forward may carry besides the anchor
MAX_REQUESTS_AT_ONCE = 64  # requests decoded together at most (engine/batch.py; their KV caches grow with it)
MAX_NEW_TOKENS = 4096
MAX_PROMPT_CHARS = 100_000  # longer prompts are refused before they are read whole or tokenized
MAX_SEED = 2**63 - 1  # seeds are non-negative signed 64-bit integers
MAX_TEMPERATURE = 5.0
# The lowest temperature that samples: below it logits / temperature overflows float32 (inf, then NaN
# probabilities), and long before that the softmax is one-hot, so 0 (greedy) says what such a run means.
MIN_SAMPLING_TEMPERATURE = 1e-3

# The numeric settings' ranges, inclusive, and how a message names them: GenerationConfig.validate and the
# app's controls (app/links.py) both check against this one table.
RANGES: dict[str, tuple[str, float, float]] = {
    "temperature": ("temperature", 0.0, MAX_TEMPERATURE),
    "seed": ("seed", 0, MAX_SEED),
    "max_new_tokens": ("max new tokens", 1, MAX_NEW_TOKENS),
    "drafts_per_step": ("draft length K", 1, MAX_DRAFTS),
    "confidence_threshold": ("confidence threshold", 0.0, 1.0),
    "tree_nodes": ("tree node budget", 1, MAX_TREE_NODES),
    "requests_at_once": ("requests at once", 1, MAX_REQUESTS_AT_ONCE),
}
INTEGER_SETTINGS = ("seed", "max_new_tokens", "drafts_per_step", "tree_nodes", "requests_at_once")

# Why a run ended, on its last Step: end-of-text, max_new_tokens reached, the model's context full. A trace
# whose last step carries no reason was stopped before it finished (or is still running).
FINISH_REASONS = ("eos", "length", "context")
STOPPED = "stopped"


class EngineError(ValueError):
    """A problem the user can fix (bad input, missing model); its message is one clear line."""


class Stopped(EngineError):
    """A run or a measurement ended early because its `stop` event was set (a Stop press, a time limit)."""


def check_stop(stop) -> None:
    """Raise Stopped once `stop` (a threading.Event, or None for never) is set."""
    if stop is not None and stop.is_set():
        raise Stopped("stopped")


def check_device_name(requested: str) -> None:
    """Refuse (EngineError, one line) a device name other than "auto", "cpu", "cuda" or "cuda:N". Whether this
    machine has that device is models.pick_device's question; this one needs no torch, so the command line
    answers a misspelt name at once."""
    kind, colon, index = requested.partition(":")
    if requested in ("auto", "cpu") or (kind == "cuda" and (not colon or (index.isascii() and index.isdigit()))):
        return
    raise EngineError(f"unknown device {requested!r}: choose auto, cpu or cuda (cuda:N for GPU N)")


def check_range(name: str, value) -> None:
    """Raise EngineError (one line) unless `value` is a number in RANGES[name] (a whole one where it must be)."""
    words, low, high = RANGES[name]
    whole = name in INTEGER_SETTINGS
    kind = (int,) if whole else (int, float)
    finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if isinstance(value, bool) or not isinstance(value, kind) or not finite or not low <= value <= high:
        expect = f"an integer from {low} to {high}" if whole else f"a number from {low:g} to {high:g}"
        raise EngineError(f"{words} must be {expect}, got {value!r}")
    if name == "temperature" and 0 < value < MIN_SAMPLING_TEMPERATURE:
        raise EngineError(temperature_too_low(value))


def temperature_too_low(value: float) -> str:
    """The one line for a positive temperature below MIN_SAMPLING_TEMPERATURE (the app's controls say it too)."""
    return (f"temperature {value:g} is too low to sample with: use 0 for greedy decoding, or at least "
            f"{MIN_SAMPLING_TEMPERATURE:g}")


@dataclass(frozen=True)
class GenerationConfig:
    method: str = DEFAULT_METHOD  # a name in methods.METHOD_REGISTRY
    max_new_tokens: int = 64  # stop after this many new tokens (or at end-of-text, or the context limit)
    temperature: float = 0.0  # 0 = greedy; > 0 samples from softmax(logits / temperature)
    seed: int = 0  # seeds the one generator every random draw of a run comes from
    drafts_per_step: int = 4  # K: tokens drafted per step, the anchor never counted (ignored by the baseline)
    # A tree lane's node budget: drafted tokens per step, spread over a tree no deeper than drafts_per_step
    tree_nodes: int = 16
    verify_rule: str = "rejection"  # rule at temperature > 0: "rejection" or "match"
    scheduler: str = "throughput"  # DSpark: how much of the block to verify (see scheduler.py)
    confidence_threshold: float = 0.5  # DSpark static cut: verify up to the first confidence below this
    markov_head: bool = True  # DSpark: False drafts with the same checkpoint's backbone alone (an ablation)
    # Above temperature 0: "auto" drafts with the checkpoint trained for sampling where the preset has one,
    # "greedy" with the temperature-0 checkpoint (presets.DRAFTER_WEIGHTS); at temperature 0 both are the same.
    drafter_weights: str = "auto"
    # Above temperature 0: "sample" proposes draws from the drafter's distribution, "argmax" its likeliest tokens,
    # "auto" the method's own choice (presets.PROPOSALS); at temperature 0 every drafter proposes its argmax.
    proposal: str = "auto"
    # Requests decoded together (engine/batch.py): above 1 the run's prompt is the first request of a batch whose
    # others are held-out prompts with the same settings; its trace is that request's, its steps the batch's.
    requests_at_once: int = 1
    # The feature drafters (DFlash, DSpark, EAGLE-3): how many of the latest context positions the drafter attends
    # to (None: all of them), as serving engines cap a drafter trained on short windows; the target sees everything.
    drafter_window: int | None = None
    # The same drafters: after each verify, a few optimiser steps on a copy of the drafter that lives for this run
    # only, on the tokens the target just wrote (engine/online.py); the output is still the target's.
    self_tuning: bool = False

    @property
    def proposes(self) -> str:
        """What the drafter proposes in this run: "sample" or "argmax" ("auto" resolved by the method)."""
        return METHOD_REGISTRY[self.method].proposal if self.proposal == "auto" else self.proposal
    # Host work of a step (trace, text) runs while the next step drafts and verifies. None = automatic: on
    # for CUDA; off on the CPU, where both would share the same cores and interpreter lock (docs/benchmarks.md).
    overlap: bool | None = None

    def validate(self) -> None:
        """Raise EngineError with one clear line for any value out of range."""
        if self.method not in METHOD_REGISTRY:
            raise EngineError(f"unknown method {self.method!r}; choose one of {', '.join(METHOD_REGISTRY)}")
        for name in RANGES:
            check_range(name, getattr(self, name))
        if self.verify_rule not in VERIFY_RULES:
            raise EngineError(f"unknown verification rule {self.verify_rule!r}; choose one of {', '.join(VERIFY_RULES)}")
        if self.scheduler not in SCHEDULERS:
            raise EngineError(f"unknown scheduler {self.scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
        if self.proposal not in PROPOSALS:
            raise EngineError(f"unknown proposal {self.proposal!r}; choose one of {', '.join(PROPOSALS)}")
        if self.drafter_weights not in DRAFTER_WEIGHTS:
            raise EngineError(f"unknown drafter weights {self.drafter_weights!r}; choose one of "
                              f"{', '.join(DRAFTER_WEIGHTS)}")
        if not isinstance(self.markov_head, bool):
            raise EngineError(f"markov_head must be true or false, got {self.markov_head!r}")
        if self.drafter_window is not None and (isinstance(self.drafter_window, bool) or not isinstance(
                self.drafter_window, int) or not 1 <= self.drafter_window <= MAX_NEW_TOKENS):
            raise EngineError(f"drafter window must be a whole number from 1 to {MAX_NEW_TOKENS} or none, "
                              f"got {str(self.drafter_window)[:20]!r}")
        if not isinstance(self.self_tuning, bool):
            raise EngineError(f"self_tuning must be true or false, got {self.self_tuning!r}")
        if self.overlap not in (None, True, False):
            raise EngineError(f"overlap must be on, off or automatic, got {self.overlap!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class Request:
    """One run, checked before any model runs: the prompt's token ids (encoded, within the context) and a validated
    configuration whose drafts per step are already cut to the drafter's trained block, so the request says what
    will run. Made by `checked_requests` (an engine's `requests`) only; a run takes it as it is and checks nothing
    again. Plain values: it pickles, for an engine in another process."""

    prompt_ids: tuple[int, ...]
    config: GenerationConfig

    @property
    def drafts_per_step(self) -> int | None:
        """The drafts per step it runs (after its drafter's cap); None for a method that drafts none."""
        return self.config.drafts_per_step if METHOD_REGISTRY[self.config.method].drafts else None


def checked_requests(engine, prompt: str, configs) -> list[Request]:
    """The requests for `configs` over one prompt, on `engine` (its `encode_prompt` and `max_drafts`): every
    configuration validated, then the prompt encoded once (EngineError, one line, for an empty, too long or
    over-context prompt), then each drafting method's drafts per step cut to its drafter's trained block."""
    configs = list(configs)
    for config in configs:
        config.validate()
    prompt_ids = tuple(engine.encode_prompt(prompt))
    requests = []
    for config in configs:
        cap = engine.max_drafts(config.method) if METHOD_REGISTRY[config.method].drafts else None
        if cap is not None and config.drafts_per_step > cap:
            config = replace(config, drafts_per_step=cap)
        requests.append(Request(prompt_ids, config))
    return requests


def as_request(engine, request: Request | str, config: GenerationConfig | None = None) -> Request:
    """`request` as it is, or a prompt and its config (default: the defaults) made into one on `engine`: a script's
    `generate(prompt, config)` takes the one path a checked request takes."""
    if isinstance(request, Request):
        if config is not None:
            raise TypeError("a Request carries its own config")
        return request
    return engine.requests(request, [config if config is not None else GenerationConfig()])[0]


@dataclass(frozen=True)
class Span:
    """One timed piece of work. work is "draft", "verify", "host" or "train" (engine/online.py); times are seconds from run start.
    cpu_s is the CPU time the thread doing the work spent in it (on the CPU only; None on CUDA, where the
    work runs on the device): unlike the wall time, it does not grow while another process holds the core."""

    work: str
    start_s: float
    end_s: float
    label: str = ""
    cpu_s: float | None = None


@dataclass(frozen=True)
class TopToken:
    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class DraftedToken:
    """One drafted token and what verification made of it.

    verdict: "accepted", "rejected", "unverified" (drafted after the first rejection, so never judged), or
    "cut" (DSpark's scheduler did not send it to the target). confidence is DSpark's calibrated
    P(this token survives | the earlier ones did), None for other drafters.
    Probabilities are under the run's temperature (softmax of the raw logits at temperature 0).
    accept_prob is the chance the rule in force accepts this token given its prefix: min(1, p_target /
    p_draft) for the rejection rule, p_target for the match rule, 1 or 0 for greedy. draw is the uniform
    number the rejection rule compared with accept_prob (None for the other rules).
    tv is the total-variation distance between the target's and the drafter's whole distributions at this
    position, ½ Σ_x |p(x) − q(x)|: under the rejection rule a token drawn from q passes with probability
    exactly 1 − tv, the ceiling on acceptance that the drafter's distance from the target sets.
    Tokens after the first rejection carry None: their target probabilities sit on a rejected prefix.
    """

    id: int
    text: str
    verdict: str
    draft_prob: float
    target_prob: float | None
    accept_prob: float | None
    draw: float | None
    draft_top: tuple[TopToken, ...]
    target_top: tuple[TopToken, ...]
    confidence: float | None = None
    tv: float | None = None


@dataclass(frozen=True)
class CommittedToken:
    """A token added to the output. source: "accepted" (a draft that passed) or "bonus" (from the target).
    text is what this token adds to the output text: "" while it ends inside a multi-byte character, whose
    completing token then carries the whole character, so the texts join to the output exactly."""

    id: int
    text: str
    source: str


def tree_depths(parents: tuple[int, ...]) -> list[int]:
    """Each node of a tree draft's depth: 1 for a child of the anchor, its parent's depth + 1 below (parents come
    first; engine/tree.py)."""
    out: list[int] = []
    for parent in parents:
        out.append(1 if parent < 0 else out[parent] + 1)
    return out


@dataclass(frozen=True)
class Step:
    """One step: draft, then one target forward that verifies. The prefill is step 0 with kind "prefill"."""

    index: int
    kind: str  # "prefill" or "decode"
    drafted: tuple[DraftedToken, ...]
    num_verified: int  # ℓ: drafted tokens sent to the target (DSpark may cut the block)
    num_accepted: int  # a: leading drafted tokens that survived
    bonus_id: int
    committed: tuple[CommittedToken, ...]  # the accepted drafts then the bonus, cut at a stop
    spans: tuple[Span, ...]
    finish_reason: str | None = None  # on the run's last step: one of FINISH_REASONS; None on every other
    # A tree draft: each drafted token's parent (an index into drafted, -1 for a child of the anchor); the accepted
    # tokens are then a path from the anchor down, not the first num_accepted. None for a chain.
    parents: tuple[int, ...] | None = None
    # Many requests at once (engine/batch.py): how many the step's verify forward served, and the tokens all of them
    # committed during the step (None for a request decoded alone).
    batch_size: int = 1
    batch_tokens: int | None = None

    @property
    def drafted_ids(self) -> list[int]:
        return [t.id for t in self.drafted]

    @property
    def accepted_positions(self) -> list[int]:
        """The indices into `drafted` of the accepted tokens, in the order they were committed: a chain's first
        num_accepted, a tree's path from the anchor down."""
        if self.parents is None:
            return list(range(self.num_accepted))
        return [i for i, token in enumerate(self.drafted) if token.verdict == "accepted"]

    @property
    def reach(self) -> int:
        """How many positions past the anchor the verified draft reaches: a chain's verified tokens, a tree's depth."""
        return self.num_verified if self.parents is None else max(tree_depths(self.parents), default=0)

    @property
    def num_judged(self) -> int:
        """Drafted tokens the rule decided on: those sent to the target up to and including the first rejection
        (the ones after it are sent but never judged)."""
        return min(self.num_verified, self.num_accepted + 1)

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.committed)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["drafted_ids"] = self.drafted_ids
        d["text"] = self.text
        for span in d["spans"]:  # "lane": the trace format's first name for the kind of work, kept for its readers
            span["lane"] = span["work"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Step":
        """The inverse of to_dict (a saved trace read back), checked completely: every name from the engine's
        own vocabulary, every number finite and in its range, accepted ≤ verified ≤ drafted. Anything else
        raises ValueError naming the first bad field (KeyError for a missing one)."""
        read = _Reader()
        drafted = tuple(read.drafted(t, i) for i, t in enumerate(read.items(d["drafted"], "drafted")))
        num_verified, num_accepted = read.count(d["num_verified"], "num_verified"), read.count(d["num_accepted"],
                                                                                              "num_accepted")
        if not num_accepted <= num_verified <= len(drafted):
            raise ValueError(f"num_accepted {num_accepted} ≤ num_verified {num_verified} ≤ {len(drafted)} drafted "
                             "does not hold")
        committed = tuple(CommittedToken(read.id(t["id"], "committed id"), read.text(t["text"], "committed text"),
                                         read.choice(t["source"], SOURCES, "committed source"))
                          for t in read.items(d["committed"], "committed"))
        parents = read.parents(d.get("parents"), len(drafted))
        if parents is None:
            read.consistent(drafted, num_verified, num_accepted, committed)
        else:
            read.consistent_tree(drafted, parents, num_accepted, committed)
        spans = tuple(read.span(x) for x in read.items(d["spans"], "spans"))
        finish = d.get("finish_reason")
        batch_size, batch_tokens = d.get("batch_size", 1), d.get("batch_tokens")
        if read.count(batch_size, "batch_size") < 1:
            raise ValueError("batch_size must be at least 1, got 0")
        batch_tokens = None if batch_tokens is None else read.count(batch_tokens, "batch_tokens")
        return cls(index=read.count(d["index"], "index"), kind=read.choice(d["kind"], STEP_KINDS, "kind"),
                   drafted=drafted, num_verified=num_verified, num_accepted=num_accepted,
                   bonus_id=read.id(d["bonus_id"], "bonus_id"), committed=committed, spans=spans,
                   finish_reason=None if finish is None else read.choice(finish, FINISH_REASONS, "finish_reason"),
                   parents=parents, batch_size=batch_size, batch_tokens=batch_tokens)


# The trace's vocabulary: what a saved step may say, and nothing else.
STEP_KINDS = ("prefill", "decode")
VERDICTS = ("accepted", "rejected", "unverified", "cut")
SOURCES = ("accepted", "bonus")
WORKS = ("draft", "verify", "host", "train")  # train: a self-tuning drafter's steps
MAX_TOKEN_ID = 2**31 - 1  # no vocabulary is larger; a bigger "id" is not a token
PROBABILITY_SLACK = 1e-6  # float rounding can put a probability a hair above 1


class _Reader:
    """Reads the plain values of a saved step, refusing (ValueError, naming the field) anything the engine
    could not have written."""

    @staticmethod
    def items(value, name: str) -> list:
        if not isinstance(value, list):
            raise ValueError(f"{name} must be a list, got {type(value).__name__}")
        return value

    @staticmethod
    def count(value, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_ID:
            raise ValueError(f"{name} must be a whole number from 0, got {str(value)[:20]!r}")
        return value

    def id(self, value, name: str) -> int:
        return self.count(value, name)

    @staticmethod
    def text(value, name: str) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be text, got {type(value).__name__}")
        return value

    @staticmethod
    def choice(value, options: tuple[str, ...], name: str) -> str:
        if value not in options:
            raise ValueError(f"{name} must be one of {', '.join(options)}, got {str(value)[:20]!r}")
        return value

    @staticmethod
    def number(value, name: str, low: float = 0.0, high: float = math.inf) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            raise ValueError(f"{name} must be a finite number from {low:g}" + (f" to {high:g}" if high < math.inf else "")
                             + f", got {str(value)[:20]!r}")
        return float(value)

    def probability(self, value, name: str, optional: bool = False) -> float | None:
        if value is None and optional:
            return None
        return min(1.0, self.number(value, name, 0.0, 1.0 + PROBABILITY_SLACK))

    def top(self, items, name: str) -> tuple[TopToken, ...]:
        """A top-k list: most of a saved trace's values, so the common case is checked in one comparison per
        field and only a bad entry goes the long way (the same checks, which name the field)."""
        tokens = []
        for t in self.items(items, name):
            token_id, text, prob = t["id"], t["text"], t["prob"]
            if type(token_id) is int and 0 <= token_id <= MAX_TOKEN_ID and type(text) is str \
                    and type(prob) in (int, float) and 0.0 <= prob <= 1.0 + PROBABILITY_SLACK:  # NaN fails here too
                tokens.append(TopToken(token_id, text, min(1.0, float(prob))))
            else:
                tokens.append(TopToken(self.id(token_id, f"{name} id"), self.text(text, f"{name} text"),
                                       self.probability(prob, f"{name} prob")))
        return tuple(tokens)

    def drafted(self, t: dict, i: int) -> DraftedToken:
        where = f"drafted token {i + 1}"
        return DraftedToken(
            id=self.id(t["id"], f"{where} id"), text=self.text(t["text"], f"{where} text"),
            verdict=self.choice(t["verdict"], VERDICTS, f"{where} verdict"),
            draft_prob=self.probability(t["draft_prob"], f"{where} draft_prob"),
            target_prob=self.probability(t["target_prob"], f"{where} target_prob", optional=True),
            accept_prob=self.probability(t["accept_prob"], f"{where} accept_prob", optional=True),
            draw=self.probability(t["draw"], f"{where} draw", optional=True),
            draft_top=self.top(t["draft_top"], f"{where} draft_top"),
            target_top=self.top(t["target_top"], f"{where} target_top"),
            confidence=self.probability(t.get("confidence"), f"{where} confidence", optional=True),
            tv=self.probability(t.get("tv"), f"{where} tv", optional=True))

    @staticmethod
    def consistent(drafted: tuple[DraftedToken, ...], num_verified: int, num_accepted: int,
                   committed: tuple[CommittedToken, ...]) -> None:
        """The verdicts and the committed tokens agree with the counts, as the loop writes them: the first
        num_accepted drafts accepted and committed as they were drafted, then the rejected one, the unverified
        ones and the cut ones; the bonus last (a stop may cut the committed tokens short)."""
        for i, token in enumerate(drafted):
            expected = ("accepted" if i < num_accepted else "cut" if i >= num_verified
                        else "rejected" if i == num_accepted else "unverified")
            if token.verdict != expected:
                raise ValueError(f"drafted token {i + 1} says {token.verdict} where the counts say {expected}")
        if len(committed) > num_accepted + 1:
            raise ValueError(f"{len(committed)} committed tokens after {num_accepted} accepted drafts")
        for i, token in enumerate(committed):
            expected = "accepted" if i < num_accepted else "bonus"
            if token.source != expected or (expected == "accepted" and token.id != drafted[i].id):
                raise ValueError(f"committed token {i + 1} is not the {expected} token the counts say")

    def parents(self, value, num_drafted: int) -> tuple[int, ...] | None:
        """A tree's parents: one per drafted token, each -1 or an earlier token's index (parents come first)."""
        if value is None:
            return None
        items = self.items(value, "parents")
        if len(items) != num_drafted:
            raise ValueError(f"parents has {len(items)} entries for {num_drafted} drafted tokens")
        for i, parent in enumerate(items):
            if isinstance(parent, bool) or not isinstance(parent, int) or not -1 <= parent < i:
                raise ValueError(f"drafted token {i + 1}'s parent must be -1 or an earlier token, got "
                                 f"{str(parent)[:20]!r}")
        return tuple(items)

    @staticmethod
    def consistent_tree(drafted: tuple[DraftedToken, ...], parents: tuple[int, ...], num_accepted: int,
                        committed: tuple[CommittedToken, ...]) -> None:
        """A tree step as the loop writes it: its accepted tokens a path down from the anchor, committed in that
        order, then the bonus; no token cut (a tree is verified whole)."""
        path = [i for i, token in enumerate(drafted) if token.verdict == "accepted"]
        if len(path) != num_accepted:
            raise ValueError(f"{len(path)} drafted tokens say accepted where num_accepted is {num_accepted}")
        for depth, node in enumerate(path):
            if parents[node] != (path[depth - 1] if depth else -1):
                raise ValueError(f"accepted drafted token {node + 1} does not hang under the accepted path")
        if any(token.verdict == "cut" for token in drafted):
            raise ValueError("a tree's tokens are never cut")
        if len(committed) > num_accepted + 1:
            raise ValueError(f"{len(committed)} committed tokens after {num_accepted} accepted drafts")
        for i, token in enumerate(committed):
            expected = "accepted" if i < num_accepted else "bonus"
            if token.source != expected or (expected == "accepted" and token.id != drafted[path[i]].id):
                raise ValueError(f"committed token {i + 1} is not the {expected} token the tree says")

    def span(self, x: dict) -> Span:
        work = self.choice(x["work"] if "work" in x else x["lane"], WORKS, "span work")
        start, end = self.number(x["start_s"], "span start_s"), self.number(x["end_s"], "span end_s")
        if end < start:
            raise ValueError(f"a span ends ({end:g} s) before it starts ({start:g} s)")
        cpu = x.get("cpu_s")
        cpu = None if cpu is None else self.number(cpu, "span cpu_s")
        return Span(work, start, end, self.text(x.get("label", ""), "span label"), cpu)


@dataclass(frozen=True)
class RunSummary:
    num_new_tokens: int
    num_steps: int  # decode steps, prefill excluded
    alpha: float  # mean accepted drafted tokens per decode step
    tau: float  # mean tokens committed per decode step (= alpha + 1)
    wall_s: float  # prefill and all steps, measured
    tokens_per_s: float
    prefill_s: float
    draft_s: float  # summed span time per lane over the decode steps
    verify_s: float
    host_s: float
    bubble_s: float  # wall time in no span at all: idle gaps between pieces of work
    finish_reason: str  # one of FINISH_REASONS, or STOPPED
    # Compute time: the CPU time the decoding threads spent in the run's spans (prefill included), and new tokens
    # per second of it. None on CUDA, or for a trace saved without CPU times.
    cpu_s: float | None = None
    tokens_per_cpu_s: float | None = None
    # Many requests at once: the batch's throughput while this request ran, every request's new tokens per second
    # of its wall time; None for a request decoded alone.
    batch_tokens_per_s: float | None = None


@dataclass(frozen=True)
class RunResult:
    method: str
    preset: str
    device: str
    config: GenerationConfig
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    text: str
    prefill: Step
    steps: tuple[Step, ...]
    summary: RunSummary
    per_position_acceptance: tuple[float | None, ...] = field(default=())
    drafter: str = ""  # which drafter served the method, in words ("EAGLE-3, 1 layer")

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "drafter": self.drafter,
            "preset": self.preset,
            "device": self.device,
            "config": asdict(self.config),
            "prompt_ids": list(self.prompt_ids),
            "output_ids": list(self.output_ids),
            "text": self.text,
            "prefill": self.prefill.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
            "summary": asdict(self.summary),
            "per_position_acceptance": list(self.per_position_acceptance),
        }
