"""A lane as HTML: header, live chips, the coloured output, and the fold-out list of steps.

Pure functions from the engine's plain per-step values to strings. Tokens that entered the output carry
`data-out` so a reader (or a test) can check that they join to exactly the engine's text; rejected and
never-verified drafts are shown inline too, but without that mark.
"""

from __future__ import annotations

import html
import re
from statistics import median

from engine.contract.methods import BASELINE, METHOD_REGISTRY, method_label
from engine.contract.summary import acceptance_rate
from engine.contract.types import DraftedToken, Step

from ..glossary import hover, meaning
from ..comparison import Comparison
from ..texts import first_edited
from .theme import MARKER_GLYPHS, lane_style

MAX_STEP_ROWS = 200  # the fold-out list shows the latest steps only, past this many

# C0 control characters other than tab and newline would be invisible or dropped by the browser; the text
# view shows them as their Unicode "control pictures" (U+2400 block), DEL as U+2421.
_CONTROL_PICTURES = {c: chr(0x2400 + c) for c in range(32) if chr(c) not in "\t\n"} | {0x7F: "\u2421"}
# The explicit bidirectional controls (embeddings, overrides, isolates) would reorder what is drawn after them:
# a right-to-left override in a prompt, a file or a server's text could make the page show text it does not
# hold. They are drawn as their names instead; right-to-left letters themselves are drawn as they are, each
# text in its own isolated box (app/draw/theme.py), so they never reorder what is around it.
BIDI_CONTROLS = {0x202A: "LRE", 0x202B: "RLE", 0x202C: "PDF", 0x202D: "LRO", 0x202E: "RLO", 0x2066: "LRI",
                 0x2067: "RLI", 0x2068: "FSI", 0x2069: "PDI"}
_SHOWN = _CONTROL_PICTURES | {c: f"\u27e8{name}\u27e9" for c, name in BIDI_CONTROLS.items()}
_TO_SHOW = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_SHOWN)) + "]")  # finds one in C, at once


def display_text(text: str) -> str:
    """The text as the lanes show it: control characters (C0, DEL, the bidirectional controls) as visible
    symbols, all else unchanged. (Most texts hold none: found by one search, not a lookup per character.)"""
    return text.translate(_SHOWN) if _TO_SHOW.search(text) else text


def visible(text: str) -> str:
    return html.escape(display_text(text))


_GHOST_WHITESPACE = str.maketrans({"\n": "↵", " ": "·", "\t": "→"})


def visible_ghost(text: str) -> str:
    """A draft that is not part of the output: its whitespace drawn as symbols, so it never breaks the
    output's lines or hides as an empty box."""
    return visible(text.translate(_GHOST_WHITESPACE))


def chart_label(text: str) -> str:
    """A token as a plotly label: quoted, whitespace and control characters drawn as symbols, escaped for the
    markup plotly reads (quotes left as they are: plotly prints an entity such as &quot; literally)."""
    return "'" + html.escape(display_text(text.translate(_GHOST_WHITESPACE)), quote=False) + "'"


def _fmt_p(p: float | None) -> str:
    """A probability to three decimals, or to three significant digits below 0.001, where three decimals would
    print 0.000 beside a ratio that is far from 0."""
    if p is None:
        return "—"
    return f"{p:.3f}" if p >= 0.001 or p == 0 else f"{p:.2e}"


def _top_line(top) -> str:
    return ", ".join(f"{t.text!r} {t.prob:.2f}" for t in top[:3])


VERDICT_WORDS = {"accepted": "accepted draft", "rejected": "rejected draft",
                 "unverified": "drafted, never verified", "cut": "drafted, cut by the scheduler"}


def _verdict_lines(token: DraftedToken, rule: str) -> list[str]:
    """How the rule in force judged the token: at temperature 0 whether it is the target's top token; under the
    rejection rule the ratio, the accept probability and the draw; under the match rule the target's own draw."""
    if token.accept_prob is None:
        return ["not sent to the target: the scheduler verified only the tokens before it" if token.verdict == "cut"
                else "never verified: an earlier draft in this block was rejected"]
    if rule == "greedy":
        return [f"temperature 0: accepted exactly when it is the target's own top token "
                f"({'it is' if token.accept_prob >= 1 else 'it is not'})"]
    if rule == "match":
        return [f"match rule: the target draws its own token and keeps the draft if they are the same "
                f"(chance {_fmt_p(token.accept_prob)}, p_target)"]
    lines = []
    if token.target_prob is not None and token.draft_prob > 0:
        lines.append(f"ratio p_target / p_draft {token.target_prob / token.draft_prob:.3f}")
    line = f"accept probability min(1, ratio) {token.accept_prob:.3f}"
    if token.draw is not None:
        passes = token.draw < token.accept_prob
        line += f" · draw r {token.draw:.3f}: r {'<' if passes else '≥'} accept probability, so it {'passes' if passes else 'fails'}"
    return lines + [line]


def _drafted_title(token: DraftedToken, step: Step, position: int, rule: str) -> str:
    lines = [f"{VERDICT_WORDS[token.verdict]} · step {step.index}, position {position}",
             f"p_target {_fmt_p(token.target_prob)} · p_draft {_fmt_p(token.draft_prob)}"]
    if token.confidence is not None:
        lines.append(f"confidence (predicted survival given the ones before) {token.confidence:.3f}")
    lines += _verdict_lines(token, rule)
    if token.target_top:
        lines.append(f"target top: {_top_line(token.target_top)}")
    lines.append(f"draft top: {_top_line(token.draft_top)}")
    return "\n".join(lines)


def status_html(text: str, error: bool = False) -> str:
    """A tab's status line: a note, or an error in the error colour."""
    return f'<div class="{"status-error" if error else "note"}">{html.escape(display_text(text))}</div>'


def bonus_reason(step: Step) -> str:
    """Why the target wrote this step's bonus token, in words."""
    if step.kind == "prefill" or not step.drafted:
        return "the target's own token"
    if step.num_accepted < step.num_verified:
        return "the target's token after the rejection"
    if step.num_verified < len(step.drafted):
        return "the target's token after the cut"
    return "the target's token after the block"


def _span(text: str, classes: str, title: str | None, in_output: bool) -> str:
    mark = " data-out" if in_output else ""
    shown = visible(text) if in_output else visible_ghost(text)
    hover = "" if title is None else f' title="{html.escape(display_text(title))}"'
    return f'<span class="tok {classes}"{mark}{hover}>{shown}</span>'


def step_tokens_html(step: Step, rule: str, show_drafts: bool = True, titles: bool = True) -> str:
    """The step's tokens in output order; rejected and unverified drafts sit just before the bonus.
    titles=False leaves out the hover text (most of the bytes), for the live view of a running lane."""
    parts = []
    a = step.num_accepted

    def title(token: DraftedToken, position: int) -> str | None:
        return _drafted_title(token, step, position, rule) if titles else None

    accepted = step.accepted_positions
    # inline after the accepted drafts: a chain's rejected, unverified and cut ones; a tree's turned-down siblings
    # (its other branches are drawn in the Step-through tab's tree)
    ghosts = ([(i, step.drafted[i]) for i in range(a, len(step.drafted))] if step.parents is None else
              [(i, t) for i, t in enumerate(step.drafted) if t.verdict == "rejected"])
    for j, token in enumerate(step.committed):
        if token.source == "accepted":
            parts.append(_span(token.text, "accepted", title(step.drafted[accepted[j]], accepted[j] + 1), True))
            continue
        if show_drafts:
            for i, ghost in ghosts:
                if i == step.num_verified and step.parents is None:
                    parts.append('<span class="cutmark" title="the scheduler cut the block here">✂</span>')
                parts.append(_span(ghost.text, f"{ghost.verdict} ghost", title(ghost, i + 1), False))
        parts.append(_span(token.text, "bonus", f"bonus · step {step.index}: {bonus_reason(step)}" if titles else None,
                           True))
    return "".join(parts)


LEGEND_HTML = (
    '<div class="legend">'
    '<span><span class="tok accepted">accepted</span> draft the target agreed with</span>'
    '<span><span class="tok rejected">rejected</span> draft (struck through)</span>'
    '<span><span class="tok bonus">bonus</span> token written by the target</span>'
    '<span><span class="tok unverified">unverified</span> drafted after a rejection, never judged</span>'
    '<span><span class="cutmark">✂</span><span class="tok cut">cut</span> drafted, not sent to the target '
    '(DSpark\'s scheduler)</span>'
    '</div>'
)


def _chip(label: str, value: str, hint: str) -> str:
    return f'<span class="chip" title="{html.escape(hint)}">{label} <b>{value}</b></span>'


CLOCK_WORDS = {"compute": "compute time of the decoding thread (its CPU seconds in draft, verify and host work: "
                           "another program on the machine does not stretch it)",
               "wall": "wall time (what a clock on the wall shows, bubbles and waiting included)",
               "batch": "throughput under load: the whole batch's new tokens per second of wall time (this request "
                        "and the held-out prompts that keep the batch full), the measure the Lesson's point 10 uses"}
MIN_BRACKET_RUNS = 3  # a speedup's bracket (the lowest and highest of its runs' own speedups) needs this many runs


BUSY_WORDS = ("the machine was busy with other work while this lane or the baseline was timed: its decoding thread "
              "computed only {share:.0f}% of its wall time (alone, 95% or more; under 80% is called busy). The "
              "wall-clock numbers (tokens/s, the wall speedup) are stretched by it; the compute-time speedup counts "
              "only the thread's own CPU time, yet shares the caches and memory with that work. Run it again when "
              "the server is quieter (docs/hosting.md)")


SERVER_BUSY_WORDS = ("the server was busy with other requests while this lane or the baseline ran live: its run in the "
                     "engine took only {share:.0f}% of its live pass on the clock (alone, 97% or more; under 50% is "
                     "called busy), the rest waiting for the page to take and draw its steps. The engine times itself, "
                     "so the speedups count its own work; still, beside such a crowd on these cores single comparisons "
                     "moved up to 17% from the median of the same comparison alone, where comparisons alone moved up "
                     "to 7% (docs/hosting.md): read this one with its bracket (or its count of runs), or run it again "
                     "when the server is quieter")


PROVISIONAL = ("provisional: the lanes are still being timed again (or the comparison not yet complete), so this "
               "number will still change")


def runs_tag(runs: int) -> str:
    """How many timing runs stand behind a figure, as its tag says it: "one run", "2 runs"."""
    return "one run" if runs == 1 else f"{runs} runs"


def _speedup_value(comparison: Comparison, method: str, clock: str | None = None) -> tuple[str, str, str]:
    """A speedup as its chip shows it, "2.10×", with its spread over the timing runs where at least
    MIN_BRACKET_RUNS runs give one that says something, "2.10× (1.90–2.30)"; the words for its hover; and its tag,
    "one run" or "2 runs", where it has no bracket because too few runs stand behind it (`Comparison.timed_rounds`,
    which the status line reads too), else ""."""
    speedup = comparison.speedup(method, clock)
    if not speedup:
        return "—", "", ""
    value, rounds = f"{speedup:.2f}×", comparison.timed_rounds(method, clock)
    if rounds is None:
        return value, "", ""
    if rounds == 1:
        return value, "; from one timing run of this lane: no spread to give, so read it as one measurement", \
            runs_tag(1)
    ratios = sorted(comparison.round_speedups(method, clock))
    low, high = f"{ratios[0]:.2f}", f"{ratios[-1]:.2f}"
    each = (f"its {rounds} timing runs' own speedups ({', '.join(f'{r:.2f}' for r in ratios)}: each run over the "
            "baseline's run of the same round)")
    if rounds < MIN_BRACKET_RUNS:
        return value, (f"; the mean of {each}; a bracket of the lowest and highest is drawn over {MIN_BRACKET_RUNS} "
                       "runs or more"), runs_tag(rounds)
    if low == high:  # a bracket that would only repeat the headline
        return value, f"; the median of {each}, all {low} to two decimals", runs_tag(rounds)
    return f"{value} ({low}–{high})", f"; the median of {each}, in brackets the lowest and highest of them", ""


def _tagged(chip: str, tag: str) -> str:
    """A chip with a tag after its value ("one run", "busy machine")."""
    return chip.replace("</b></span>", f'</b> <span class="tag">{tag}</span></span>', 1) if tag else chip


def _speedup_words(comparison: Comparison, method: str, clock: str) -> str:
    """What a speedup chip divides, for its hover."""
    if clock != "batch":
        return (f"this lane's tokens per second over the baseline lane's, both measured in this run, on the "
                f"{CLOCK_WORDS[clock]}")
    words = (f"this lane's batch tokens/s over the baseline lane's batch tokens/s at the same load, both measured "
             f"in this run: {CLOCK_WORDS['batch']}")
    latency = comparison.speedup(method, "wall")
    if latency and method != BASELINE:
        words += (f". A different measure, not this speedup: your request's own tokens/s over the baseline's request "
                  f"(its latency among the others) gives {latency:.2f}×")
    return words


def chips_html(comparison: Comparison, method: str, steps: list[Step], provisional: bool = False) -> str:
    """A lane's numbers: its summary, and its speedup over the same comparison's baseline on the comparison's
    clock (with its spread over the timing runs), the other clock's speedup beside it (on the CPU). provisional:
    the speedups will still change (the lanes are still being timed): each says so on itself, dimmed."""
    summary, clock = comparison.lanes[method].summary, comparison.clock
    (speedup, spread_words, tag) = _speedup_value(comparison, method)
    (wall, _, wall_tag) = _speedup_value(comparison, method, "wall")
    runs = comparison.lanes[method].timing_runs
    timed = (f"; each step's fastest timing over {runs} runs of this lane (the same tokens)"
             if runs > 1 and not spread_words else "")

    def mark(chip: str, tag: str) -> str:
        """A speedup chip's tag: "provisional" (dimmed) while the lanes are still timed, else how many runs stand
        behind a figure without a bracket ("one run", "2 runs")."""
        if provisional:
            return _tagged(chip.replace('class="chip"', 'class="chip provisional"', 1), "provisional")
        return _tagged(chip, tag)

    later = f"{PROVISIONAL}. " if provisional else ""
    rate = acceptance_rate(steps)
    extra = [] if rate is None else [_chip("acc. rate", f"{rate * 100:.0f}%", meaning("acceptance-rate"))]
    beside = ([mark(_chip("wall", wall, f"{later}the same speedup on {CLOCK_WORDS['wall']}"), wall_tag)]
              if clock == "compute" and wall != "—" and method != BASELINE else [])
    if (share := comparison.machine_busy(method)) is not None:  # other work took the cores while it was timed
        extra.append(_chip("CPU", f"{share * 100:.0f}%", BUSY_WORDS.format(share=share * 100)).replace(
            "</b></span>", '</b> <span class="tag">busy machine</span></span>', 1))
    if (share := comparison.server_busy(method)) is not None:  # the page lagged behind the engine: a busy server
        extra.append(_chip("engine", f"{share * 100:.0f}%", SERVER_BUSY_WORDS.format(share=share * 100)).replace(
            "</b></span>", '</b> <span class="tag">busy server</span></span>', 1))
    throughput = []  # this request ran among others: what the whole batch wrote (beside the speedup that divides it)
    if summary.batch_tokens_per_s is not None:
        batch = max(s.batch_size for s in steps)
        # over several timing runs, their median: what the speedup beside it divides, run by run
        runs = [r[2] for r in comparison.lanes[method].run_rates if len(r) > 2 and r[2]]
        rate, over = (median(runs), f"; the median of its {len(runs)} timing runs") if len(runs) > 1 else \
            (summary.batch_tokens_per_s, "")
        throughput.append(_chip("batch tokens/s", f"{rate:.0f}",
                                f"every request of the batch of {batch} (this one and {batch - 1} held-out prompts, "
                                f"each replaced as it finishes): their new tokens per second of this request's wall "
                                f"time{over}"))
    mine = ("your request's own new tokens / its measured wall time among the others, prefill included" if
            throughput else "new tokens / measured wall time, prefill included")
    return '<div class="chips">' + "".join([
        _chip("τ", f"{summary.tau:.2f}", "mean tokens committed per step (accepted drafts + the bonus)"),
        _chip("α", f"{summary.alpha:.2f}", "mean accepted drafted tokens per step"),
        _chip("tokens/s", f"{summary.tokens_per_s:.0f}", mine),
        *(throughput if clock == "batch" else []),
        mark(_chip("speedup", speedup, f"{later}{_speedup_words(comparison, method, clock)}{timed}{spread_words}"),
             tag),
        *beside,  # the other clock's speedup, next to this one
        _chip("steps", str(summary.num_steps), "target verify forwards after the prefill"),
        *extra,
        *(throughput if clock != "batch" else []),
    ]) + "</div>"


def clock_note(comparison: Comparison, within_s: float | None = None) -> str:
    """The status line's words on the speedups: what they divide, and how many timing runs stand behind them.
    within_s: the engine seconds the repeats must fit in (app/run/runner.py REPEAT_WITHIN_S), to say why a comparison
    ran once when that is why (None: not said)."""
    if comparison.baseline is None or len(comparison.lanes) < 2:
        return ""
    if comparison.clock == "batch":
        requests = comparison.settings.get("requests_at_once")
        return (" Speedups under load: each lane's batch tokens/s over the baseline's batch tokens/s at the same "
                f"load, {requests} requests at once (a server's throughput, the measure the Lesson's point 10 uses); "
                "your request's own tokens/s, its latency among the others, is a different measure, in each "
                "speedup's hover." + runs_note(comparison, within_s))
    if comparison.busy:  # a run saved without its batch's tokens
        return (" Speedups: wall time, as a request on a busy server waits for the whole batch's work, which the "
                "decoding thread's compute time does not all count." + runs_note(comparison, within_s))
    if comparison.clock == "compute":
        return (" Speedups: compute time of the decoding thread (CPU seconds, which another program on the machine "
                "does not stretch); the wall-time speedup is beside each." + runs_note(comparison, within_s))
    return " Speedups: wall time." + runs_note(comparison, within_s)


def runs_note(comparison: Comparison, within_s: float | None = None) -> str:
    """How many timing runs stand behind the speedups, in the words of the chips' brackets and tags (both read
    Comparison.timed_rounds, so "ran once" never stands beside a bracket)."""
    counts = {m: n for m in comparison.lanes if m != BASELINE and (n := comparison.timed_rounds(m)) is not None}
    if not counts:
        return ""
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{method_label(m)} {runs_tag(n)}" for m, n in counts.items())
        return (f" Timing runs behind each speedup: {listed} (a repeat that wrote other tokens, failed or was "
                f"stopped is not counted; a bracket needs {MIN_BRACKET_RUNS} runs).")
    runs = next(iter(counts.values()))
    if runs == 1:
        engine_s = sum(lane.summary.wall_s for lane in comparison.lanes.values() if lane.summary is not None)
        why = (f": one pass of the lanes took {engine_s:.0f} s of the engine's time, and the repeats must fit in "
               f"{within_s:.0f} s" if within_s is not None and engine_s > within_s / 2 else "")
        return f" Each lane ran once{why}, so each speedup says “one run” and gives no spread."
    if runs < MIN_BRACKET_RUNS:
        return (f" Each lane ran {runs} times, the lanes taking turns: each speedup is the mean of its runs' own "
                f"speedups, tagged “{runs_tag(runs)}”, with no bracket (one needs {MIN_BRACKET_RUNS} runs).")
    return (f" Each lane ran {runs} times, the lanes taking turns: each speedup is the median of its runs' own "
            "speedups, in brackets the lowest and highest.")


SAMPLE_NOTE = ("At temperature > 0 each lane draws its own sample: its text follows the target's distribution, not "
               "the baseline's exact text. The Lesson's point 2 shows that distribution check over many samples.")


def sameness_html(comparison: Comparison, method: str) -> str:
    """Whether the lane's output is the target's own, said on the lane: at temperature 0 computed by comparing its
    tokens with the baseline lane's one by one; above it, what the guarantee is instead."""
    edited = first_edited(comparison, method)
    if edited is None and method != BASELINE and BASELINE in comparison.lanes:
        edited = first_edited(comparison, BASELINE)
        edited = None if edited is None else f"the baseline's {edited}"
    if edited is not None:  # a file's texts are not what its ids decode to: no badge computed from the ids holds
        return (f'<div class="sameness differs edited" title="computed now: this lane\'s token ids decoded with the '
                f'model\'s tokenizer; the text the file gives at {edited} is not what its id decodes to">texts '
                f'edited: {html.escape(edited)} is not its token id\'s text ✗</div>')
    differs = comparison.differs_from_baseline(method)
    if differs == 0:
        return ('<div class="sameness same" title="computed now: every token of this lane compared with the '
                'baseline lane\'s (temperature 0)">identical to the baseline ✓</div>')
    if differs is not None:
        return (f'<div class="sameness differs" title="computed now: the tokens of this lane and the baseline lane\'s, '
                f'one by one">differs from the baseline at token {differs} ✗</div>')
    if not comparison.greedy and method != BASELINE and comparison.lanes[method].summary is not None:
        return (f'<div class="sameness sample" title="{html.escape(SAMPLE_NOTE)}">a sample of the target\'s '
                f'distribution, not its exact text (<a href="?lesson=2" target="_blank">the check</a>)</div>')
    return ""


def _step_row(step: Step) -> str:
    """One row of the fold-out list of steps. Its tokens carry no hover text: the same tokens in the output
    above carry it (repeating it here doubled the bytes a long run sends)."""
    if step.parents is None:
        block = "".join(
            ('<span class="cutmark">✂</span>' if i == step.num_verified else "")
            + f'<span class="tok {t.verdict}">{visible_ghost(t.text)}</span>'
            for i, t in enumerate(step.drafted)) or '<span class="note">(nothing drafted)</span>'
    else:  # a tree: its accepted path, the siblings turned down on the way, and its size
        shown = [step.drafted[i] for i in step.accepted_positions] + [t for t in step.drafted if t.verdict == "rejected"]
        block = ("".join(f'<span class="tok {t.verdict}">{visible_ghost(t.text)}</span>' for t in shown)
                 + f' <span class="note">(a tree of {len(step.drafted)})</span>')
    bonus = "".join(f'<span class="tok bonus">{visible_ghost(t.text)}</span>'
                    for t in step.committed if t.source == "bonus")
    duration_ms = (step.spans[-1].end_s - step.spans[0].start_s) * 1e3 if step.spans else 0.0
    verdict = f"{step.num_accepted}/{step.num_verified}" if step.num_verified else "—"
    if len(step.drafted) > step.num_verified:
        verdict += f" (of {len(step.drafted)})"
    return (f'<tr><td class="num">{step.index}</td><td class="block">{block} → {bonus}</td>'
            f'<td class="num" title="accepted / verified (of drafted)">{verdict}</td><td class="num">{duration_ms:.1f} ms</td></tr>')


def _hover(text: str) -> str:
    """A title= attribute for a hover (and a click-to-pin), or nothing when there is nothing to say."""
    return f' title="{html.escape(display_text(text))}"' if text else ""


def _lane_head(method: str, state: str, drafter: str) -> str:
    entry = METHOD_REGISTRY.get(method)
    description = entry.description if entry else ""
    colour, marker = lane_style(method)
    head = (f'<div class="lane-head"><span class="lane-swatch" style="color:{colour}" title="this lane\'s colour and '
            f'marker in every chart">{MARKER_GLYPHS[marker]}</span>'
            f'<span class="lane-name">{html.escape(method_label(method))}</span>'
            + (f'<span class="lane-drafter"{_hover(hover(drafter))}>{visible(drafter)}</span>' if drafter else "")
            + f'<span class="lane-desc">{html.escape(description)}</span>'
            + f'<span class="lane-state">{html.escape(state)}</span></div>')
    return (f'<div class="lane-card" style="--lane-colour:{colour}" data-method="{html.escape(method)}" '
            f'data-state="{html.escape(state)}">{head}')


def empty_lane_html(method: str, state: str, drafter: str = "") -> str:
    """A lane with no steps yet: its header and an empty box ("waiting", "not selected")."""
    return f'{_lane_head(method, state, drafter)}<div class="tokens"></div></div>'


def lane_html(comparison: Comparison, method: str, show_drafts: bool = True, live: bool = False) -> str:
    """One lane of a comparison, its chips against the same comparison's baseline. The lane's state is shown as
    it is ("waiting", "running", "done", "stopped", "recorded" or an error). live: the light view (no hover text,
    no list of steps), redrawn often while the engine is measured; the full view is drawn once, at the end. A
    live lane that is running leaves its tags open and shows no chips, so each redraw only appends to the last
    one (Gradio then sends just the new tokens; the browser closes the tags); the status line carries its
    numbers meanwhile."""
    lane = comparison.lanes[method]
    steps, state = lane.steps, lane.state
    if not steps and not (live and state == "running"):
        return empty_lane_html(method, state, lane.drafter)
    prompt = str(comparison.settings.get("prompt", ""))
    tokens = (f'<div class="tokens"><span class="prompt-text">{visible(prompt[-300:])}</span>'
              + "".join(step_tokens_html(step, comparison.rule, show_drafts, titles=not live) for step in steps))
    card = _lane_head(method, state, lane.drafter)
    if live and state == "running":
        return card + tokens  # left open: the next redraw appends to it
    decode = [s for s in steps if s.kind == "decode"]
    rows = "" if live else "".join(_step_row(s) for s in decode[-MAX_STEP_ROWS:])
    steps_html = "" if live else (
        f'<details class="steps"><summary>{len(decode)} steps: what was drafted, where it broke</summary>'
        f'<table><tr><td>#</td><td>drafted → bonus</td><td title="accepted / verified (of drafted)">acc.</td>'
        f'<td>time</td></tr>{rows}</table></details>')
    chips = chips_html(comparison, method, decode, provisional=live) if lane.summary is not None else ""
    return f'{card}{sameness_html(comparison, method)}{chips}{tokens}</div>{steps_html}</div>'
