"""The Step-through tab: replay a finished comparison one verify step at a time, every lane side by side.

Nothing here runs a model. It reads a Comparison (app/comparison.py) — the session's last run on the Compare
tab, or a saved file — and draws step i of every lane: each drafted token with its verdict and the numbers
that decided it (p_draft, p_target, the acceptance probability, the draw r), the selected token's two
distributions as bar charts, and the shared timeline with step i marked. Step 0 is the prefill; lanes take
different numbers of steps, so a lane past its end says where it finished.

Pure helpers (HTML, figures, the play clock) come first; then `layout` builds the components, `StepHandlers`
holds the handlers as plain methods, and `wire` connects the two. What each browser session is stepping
through, and whether it is playing, is kept server-side in the one session store (app/run/sessions.py), never in
gr.State, which would hold a heartbeat connection open for every visitor.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass

import gradio as gr
import plotly.graph_objects as go

from engine.contract.methods import METHOD_REGISTRY, method_label
from engine.contract.types import DraftedToken, Step, TopToken

from ..draw.charts import styled, timeline_figure
from ..glossary import hover
from ..words import probability
from ..comparison import MAX_FILE_BYTES, Comparison, RecordError, read_comparison
from ..run.sessions import SessionStore
from ..draw.render import LEGEND_HTML, bonus_reason, chart_label, status_html, visible, visible_ghost
from ..draw.theme import DRAFT_WORK, VERIFY_WORK
from ..draw.tree import summary as tree_summary, tree_svg
from ..hosting.uploads import SavedFileButton

PLAY_EVERY_S = 0.6  # Play advances one step this often
NUM_STEP_OUTPUTS = 5  # StepTabView.step_outputs
CONTEXT_CHARS = 48  # text before the step (prompt, then output) shown above each lane's block
MARKER_HALF_HEIGHT = 0.45  # the timeline's step marker, in rows (a row is 1 apart on the category axis)
CAPTION = ("Each card shows p_draft and p_target (the drafter's and the target's probability of the token) and what "
           "decided it; the rule the run used is stated above its lanes. At temperature 0 a draft is accepted exactly "
           "when it is the target's own greedy choice (its most likely token there), whatever p_draft is; above 0, "
           "under the rejection rule, it passes with probability min(1, p_target / p_draft), and r is the uniform "
           "draw that decided it (accepted when r is below that ratio).")
NO_RUN = "No run yet in this session: run a comparison on the Compare tab first."
EMPTY = '<div class="note">Press “Show my last run” or open a saved comparison.</div>'

# --- the comparison's shape ------------------------------------------------------------------------------

def last_step(comparison: Comparison) -> int:
    """The slider's end: the longest lane's number of decode steps (step 0 is the prefill)."""
    return max([0, *(len(lane.steps) - 1 for lane in comparison.lanes.values())])


def step_at(steps: list[Step], i: int) -> Step | None:
    """Step i of one lane (0 = the prefill), or None once the lane has finished."""
    return steps[i] if 0 <= i < len(steps) else None


def _float(value, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer of hundreds of digits
        return default


@dataclass(frozen=True)
class Rule:
    """How the run's tokens were judged, read from its settings: what accept_prob means there. At temperature 0
    the engine verifies greedily whatever rule was chosen (engine/sampling.py, verify): a draft passes exactly when
    it equals the target's argmax, so accept_prob is 1 or 0 and no draw is made."""

    greedy: bool
    name: str  # "greedy", "rejection" or "match"
    temperature: float = 0.0

    @property
    def accept_label(self) -> str:
        return {"rejection": "ratio", "match": "P(match)"}.get(self.name, "argmax?")

    def accept_value(self, token: DraftedToken) -> str:
        """The card's acceptance number: yes/no at temperature 0 (the argmax test), else the probability."""
        if self.greedy and token.accept_prob is not None:
            return "yes" if token.accept_prob >= 1 else "no"
        return fmt(token.accept_prob)

    def decision(self, token: DraftedToken) -> str:
        """What decided the token, in one line: the acceptance probability and, for the rejection rule, r."""
        if token.accept_prob is None:
            return ""
        if self.name == "rejection":
            return f"{self.accept_formula} = {fmt(token.accept_prob)} · r = {fmt(token.draw)}"
        if self.name == "match":
            return f"{self.accept_formula} = {fmt(token.accept_prob)}"
        return f"greedy: the target's argmax? {self.accept_value(token)}"

    @property
    def accept_formula(self) -> str:
        return {"rejection": "min(1, p_target/p_draft)", "match": "P(match) = p_target"}.get(
            self.name, "greedy: accepted exactly when it is the target's argmax, whatever p_draft and p_target are")

    @property
    def explanation(self) -> str:
        """The rule this run used, in one sentence, shown above its lanes."""
        if self.greedy:
            return ("This run is at temperature 0 (greedy): a draft is accepted exactly when it is the target's "
                    "own greedy choice, its most likely token at that position (“argmax? yes”). p_draft and "
                    "p_target do not decide it, so a token can pass with p_target below p_draft when no other "
                    "token is likelier; nothing is drawn, so r is empty.")
        if self.name == "match":
            return (f"This run is at temperature {self.temperature:g} under the match rule: the target draws its own "
                    "token at each position and a draft passes when it is that token, which happens with probability "
                    "p_target (“P(match)”); r is empty.")
        return (f"This run is at temperature {self.temperature:g} under the rejection rule: a draft passes with "
                "probability min(1, p_target / p_draft) (“ratio”), decided by a uniform draw r: accepted when r is "
                "below the ratio.")


def rule_of(comparison: Comparison) -> Rule:
    settings = comparison.settings
    temperature = _float(settings.get("temperature"), 0.0)
    if temperature == 0.0:
        return Rule(True, "greedy")
    return Rule(False, "match" if settings.get("verify_rule") == "match" else "rejection", temperature)


fmt = probability  # a probability as the tab prints it (app/words.py)


# --- tokens and their keys -------------------------------------------------------------------------------

def token_key(method: str, position: int) -> str:
    """A drafted token of the selected step: its lane and its 1-based position in the block."""
    return f"{method}:{position}"


def token_choices(comparison: Comparison, i: int) -> list[tuple[str, str]]:
    """The token selector's choices at step i: "lane · position · 'text' (verdict)"."""
    choices = []
    for method, steps in comparison.steps.items():
        step = step_at(steps, i)
        for position, token in enumerate(step.drafted if step else (), start=1):
            if step.parents is not None and token.verdict == "unverified":  # a tree's other branches: in its drawing
                continue
            label = f"{method_label(method)} · {position} · {token.text!r} ({token.verdict})"
            choices.append((label, token_key(method, position)))
    return choices


def find_token(comparison: Comparison, i: int, key) -> DraftedToken | None:
    method, _, position = str(key).partition(":")
    step = step_at(comparison.steps.get(method, ()), i)
    if step is None or not (position.isascii() and position.isdigit() and len(position) <= 4) \
            or not 1 <= int(position) <= len(step.drafted):
        return None
    return step.drafted[int(position) - 1]


def pick_token(comparison: Comparison, i: int, current=None) -> str | None:
    """Keep the current selection when step i has it, else its first rejected token, else its first draft."""
    keys = [key for _, key in token_choices(comparison, i)]
    if current in keys:
        return current
    rejected = [k for k in keys if find_token(comparison, i, k).verdict == "rejected"]
    return (rejected or keys or [None])[0]


# --- the blocks ------------------------------------------------------------------------------------------

NUMBER_HINTS = {"p_draft": "the drafter's probability of this token", "p_target": "the target's probability of it",
                "r": "the uniform draw the rejection rule compared with the acceptance probability (empty at "
                     "temperature 0 and under the match rule, which draw nothing here)"}


def _number(name: str, label: str, value: str, hint: str) -> str:
    return (f'<span class="st-label" title="{html.escape(hint)}">{html.escape(label)}</span>'
            f'<span class="st-value" data-num="{name}">{value}</span>')


def token_card(method: str, position: int, token: DraftedToken, rule: Rule, selected: bool) -> str:
    """One drafted token, large, with its verdict colour and the numbers that decided it underneath."""
    numbers = [_number("p_draft", "p_draft", fmt(token.draft_prob), NUMBER_HINTS["p_draft"]),
               _number("p_target", "p_target", fmt(token.target_prob), NUMBER_HINTS["p_target"]),
               _number("accept", rule.accept_label, rule.accept_value(token), rule.accept_formula),
               _number("r", "r", fmt(token.draw), NUMBER_HINTS["r"])]
    if token.confidence is not None:
        numbers.append(_number("confidence", "conf.", fmt(token.confidence),
                               "DSpark's predicted survival of this token given the ones before"))
    key = token_key(method, position)
    return (f'<div class="st-tok{" selected" if selected else ""}" data-key="{key}" data-verdict="{token.verdict}">'
            f'<div class="st-pos">{position}</div>'
            f'<div class="st-text"><span class="tok {token.verdict}">{visible_ghost(token.text)}</span></div>'
            f'<div class="st-nums">{"".join(numbers)}</div>'
            f'<div class="st-verdict" data-num="verdict">{token.verdict}</div></div>')


def _bonus_cards(step: Step) -> str:
    why = bonus_reason(step)
    return "".join(f'<div class="st-tok st-bonus" data-key="bonus"><div class="st-pos">+</div>'
                   f'<div class="st-text"><span class="tok bonus">{visible_ghost(t.text)}</span></div>'
                   f'<div class="st-verdict">bonus: {why}</div></div>'
                   for t in step.committed if t.source == "bonus")


def _context_html(prompt: str, steps: list[Step], i: int) -> str:
    """The last CONTEXT_CHARS characters before step i: the prompt's (grey) then the output's."""
    output = "".join(step.text for step in steps[:i])[-CONTEXT_CHARS:]
    prompt = prompt[-(CONTEXT_CHARS - len(output)):] if len(output) < CONTEXT_CHARS else ""
    return (f'<div class="st-context" title="the text before this step: the prompt (grey), then the output">'
            f'…<span class="prompt-text">{visible_ghost(prompt)}</span>{visible_ghost(output)}</div>')


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def block_summary(step: Step) -> str:
    """What became of a drafted block, counted as its cards are labelled: accepted, the one rejected, the
    unverified ones after it (the target's forward scored them, but no rule judges a draft after a rejection)
    and those a scheduler cut before the verify forward."""
    if step.parents is not None:
        return tree_summary(step)
    drafted, verified, accepted = len(step.drafted), step.num_verified, step.num_accepted
    parts = [f"{accepted} of {drafted} draft{'s' if drafted != 1 else ''} accepted"]
    if accepted < verified:
        parts.append(f"the {ordinal(accepted + 1)} rejected")
        if verified - accepted - 1:
            parts.append(f"the {verified - accepted - 1} after it unverified (never judged)")
    if verified < drafted:
        parts.append(f"{drafted - verified} cut by the scheduler before the verify")
    return " · ".join(parts)


def lane_block_html(method: str, steps: list[Step], i: int, rule: Rule, selected: str | None = None,
                    drafter: str = "", prompt: str = "") -> str:
    """Lane `method` at step i: its drafted block token by token, the bonus, or where it finished."""
    name = method_label(method)
    head = (f'<div class="lane-head"><span class="lane-name">{html.escape(name)}</span>'
            + (f'<span class="lane-drafter" title="{html.escape(hover(drafter))}">{visible(drafter)}</span>'
               if drafter else "") + "</div>")
    step = step_at(steps, i)
    if not steps:
        return (f'<div class="st-lane" data-method="{method}">{head}'
                f'<div class="st-done">no steps: this lane was stopped before it ran</div></div>')
    if step is None:
        last = steps[-1].index
        return (f'<div class="st-lane" data-method="{method}" data-done="{last}">{head}'
                f'<div class="st-done">done at step {last}</div></div>')
    of = f"step {step.index} of {steps[-1].index}"
    if step.kind == "prefill":
        summary = f"{of}, the prefill: the target reads the prompt and writes the first token"
    elif (not step.drafted and step.batch_size > 1 and step.index < steps[-1].index
          and getattr(METHOD_REGISTRY.get(method), "cuts", False)):  # not the last token: the scheduler's choice
        summary = (f"{of}: nothing drafted: among {step.batch_size} requests the scheduler measured a step of the "
                   "target alone committing more tokens a second, so the target writes one token")
    elif not step.drafted:
        summary = f"{of}: nothing drafted, the target writes one token"
    else:
        summary = f"{of}: {block_summary(step)}"
    cards = []
    for position, token in enumerate(step.drafted, start=1):
        if position == step.num_verified + 1 and token.verdict == "cut":
            cards.append('<div class="st-cut" title="the scheduler cut the block here">✂</div>')
        if step.parents is not None and token.verdict == "unverified":  # a tree's other branches: drawn below
            continue
        cards.append(token_card(method, position, token, rule, token_key(method, position) == selected))
    tree = ""
    if step.parents is not None and step.drafted:
        anchor = steps[i - 1].committed[-1].text if i >= 1 and steps[i - 1].committed else ""
        tree = f'<div class="st-tree" data-nodes="{len(step.drafted)}">{tree_svg(step, anchor)}</div>'
    return (f'<div class="st-lane" data-method="{method}" data-step="{step.index}">{head}'
            f'<div class="st-summary">{html.escape(summary)}</div>{_context_html(prompt, steps, i)}'
            f'<div class="st-toks">{"".join(cards)}{_bonus_cards(step)}</div>{tree}</div>')


def blocks_html(comparison: Comparison, i: int, selected: str | None = None) -> str:
    """The rule the run used, in words, then every lane's step i, side by side."""
    rule, prompt = rule_of(comparison), str(comparison.settings.get("prompt", ""))
    lanes = "".join(lane_block_html(m, list(lane.steps), i, rule, selected, lane.drafter, prompt)
                    for m, lane in comparison.lanes.items())
    return (f'<div class="st-rule" data-rule="{rule.name}">{html.escape(rule.explanation)}</div>'
            f'<div class="st-lanes" data-step="{i}">{lanes}</div>')


# --- figures ---------------------------------------------------------------------------------------------

def timeline_with_step(lanes: dict[str, list[Step]], i: int) -> go.Figure:
    """The Compare tab's timeline with each lane's step i outlined (from its first span's start to its last
    span's end); a lane that has finished gets no marker."""
    fig = timeline_figure(lanes)
    rows = list(fig.layout.yaxis.categoryarray)  # category positions: row k sits at y = k
    for method, steps in lanes.items():
        step = step_at(steps, i)
        if step is None or not step.spans:
            continue
        y = rows.index(method_label(method))
        fig.add_shape(type="rect", xref="x", yref="y", name=f"step {i} · {method}",
                      x0=min(s.start_s for s in step.spans) * 1e3, x1=max(s.end_s for s in step.spans) * 1e3,
                      y0=y - MARKER_HALF_HEIGHT, y1=y + MARKER_HALF_HEIGHT,
                      line=dict(color="#222", width=2), fillcolor="rgba(0,0,0,0.08)", layer="above")
    fig.update_layout(title=dict(text=f"step {i} of every lane, outlined", font=dict(size=13), x=0.01,
                                 xanchor="left", xref="container", yref="container", y=0.99, yanchor="top"),
                      margin_t=80)  # the title above the legend's rows (the legend sits on the plot's top)
    return fig


def _bars(top: tuple[TopToken, ...], drafted: DraftedToken, drafted_prob: float | None) -> tuple[list, list, list]:
    """Labels, probabilities and outline widths of one chart: the top tokens, plus the drafted one when it
    is not among them (outlined either way)."""
    tokens = [(t.id, t.text, t.prob) for t in top]
    if drafted.id not in {t.id for t in top} and drafted_prob is not None:
        tokens.append((drafted.id, drafted.text, drafted_prob))
    labels, seen = [], set()
    for token_id, text, _ in tokens:  # plotly reads labels as HTML: escaped, whitespace drawn as symbols
        label = chart_label(text) + (f" #{token_id}" if text in seen else "")
        seen.add(text)
        labels.append(label + (" ◀ drafted" if token_id == drafted.id else ""))
    return labels, [p for *_, p in tokens], [2.5 if token_id == drafted.id else 0 for token_id, *_ in tokens]


def _bar_figure(labels: list[str], probs: list[float], outline: list[float], colour: str, title: str,
                empty: str = "") -> go.Figure:
    fig = go.Figure(go.Bar(orientation="h", y=labels, x=probs, marker_color=colour, marker_line_color="#222",
                           marker_line_width=outline, text=[fmt(p) for p in probs], textposition="auto",
                           hovertemplate="%{y}: %{x:.4f}<extra></extra>"))
    if empty:
        fig.add_annotation(text=empty, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_layout(title=dict(text=title, font=dict(size=13)), height=260, margin=dict(l=10, r=10, t=50, b=30),
                      plot_bgcolor="white", xaxis=dict(range=[0, 1], title="probability", gridcolor="#eee"),
                      yaxis=dict(autorange="reversed", type="category"), showlegend=False)
    return fig


def distribution_figures(token: DraftedToken | None, rule: Rule,
                         none: str = "select a drafted token above") -> tuple[go.Figure, go.Figure]:
    """The selected token's draft and target top tokens (draft orange, target blue); both titles carry the
    acceptance probability and the draw that decided it. none: what the charts say without a token."""
    if token is None:
        return (_bar_figure([], [], [], DRAFT_WORK, "draft's top tokens", none),
                _bar_figure([], [], [], VERIFY_WORK, "target's top tokens", none))
    decision = " · ".join(part for part in (rule.decision(token), token.verdict) if part)
    draft = _bar_figure(*_bars(token.draft_top, token, token.draft_prob), DRAFT_WORK,
                        f"draft's top tokens (p_draft)<br>{html.escape(decision, quote=False)}")
    never = "" if token.target_top else ("never verified: cut by the scheduler" if token.verdict == "cut"
                                         else "never verified: an earlier draft was rejected")
    target = _bar_figure(*_bars(token.target_top, token, token.target_prob), VERIFY_WORK,
                         f"target's top tokens (p_target)<br>{html.escape(decision, quote=False)}", never)
    return draft, target


# --- the view of one step --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepView:
    """Everything the tab shows for step i of a comparison."""

    blocks: str
    timeline: go.Figure
    choices: list[tuple[str, str]]
    selected: str | None
    draft_figure: go.Figure
    target_figure: go.Figure


def step_view(comparison: Comparison, i: int, selected=None, projector: bool = False) -> StepView:
    """Step i (clamped to the comparison's steps); selected: the token key to keep selected if step i has it;
    projector: its charts laid out for a room (app/draw/layout.py for_projector)."""
    i = max(0, min(int(i), last_step(comparison)))
    choices = token_choices(comparison, i)
    key = pick_token(comparison, i, selected)
    draft, target = distribution_figures(find_token(comparison, i, key), rule_of(comparison),
                                         "select a drafted token above" if choices else "no lane drafted at this step")
    return StepView(blocks_html(comparison, i, key), styled(timeline_with_step(comparison.steps, i), projector), choices,
                    key, styled(draft, projector), styled(target, projector))


def advance(i: int, last: int) -> tuple[int, bool]:
    """One tick of Play: the next step, and whether to keep playing (not once the last step is shown)."""
    following = min(i + 1, last)
    return following, following < last


def step_number(raw, last: int) -> int:
    """The slider's raw value (events skip Gradio's preprocessing) as a step from 0 to `last`."""
    value = _float(raw, 0.0)
    if not math.isfinite(value):  # NaN is no step; ±inf (or "1e999") is past either end
        value = 0.0 if math.isnan(value) else math.copysign(last, value)
    return max(0, min(int(value), last))


def describe(comparison: Comparison, source: str) -> str:
    s = comparison.settings
    lanes = ", ".join(method_label(m) for m in comparison.lanes)
    rule = rule_of(comparison)
    how = "temperature 0 (greedy)" if rule.greedy else \
        f"temperature {s.get('temperature')}, {rule.name} rule, seed {s.get('seed')}"
    where = f" on {comparison.device}" if comparison.device else ""
    return (f"{source}: {lanes} · {how}{where} · steps 0 (the prefill) to {last_step(comparison)}. "
            "Nothing is rerun: these are the run's own numbers.")


# --- the layout ------------------------------------------------------------------------------------------

@dataclass
class StepTabView:
    """The tab's components, as `layout` built them."""

    show_button: gr.Button
    upload: gr.UploadButton
    status: gr.HTML
    slider: gr.Slider
    previous_button: gr.Button
    next_button: gr.Button
    play_button: gr.Button
    pause_button: gr.Button
    timer: gr.Timer
    blocks: gr.HTML
    token: gr.Dropdown
    draft_plot: gr.Plot
    target_plot: gr.Plot
    timeline: gr.Plot
    focus: gr.HTML  # a lesson point's "look at" note

    @property
    def step_outputs(self) -> list:
        """What changes with the step (NUM_STEP_OUTPUTS): the blocks, the timeline, the token selector and its
        two charts."""
        return [self.blocks, self.timeline, self.token, self.draft_plot, self.target_plot]


def layout() -> StepTabView:
    """Build the tab's components (inside a gr.Blocks); no behaviour."""
    gr.Markdown("Replay a finished comparison one verify step at a time: step *i* of every lane side by side, "
                "each drafted token with the numbers that decided it. Step 0 is the prefill.", elem_classes="note")
    with gr.Row():
        show_button = gr.Button("Show my last run", variant="primary", elem_id="step-show-last", scale=1)
        upload = SavedFileButton("Open a saved comparison (.json)", file_types=[".json"], type="filepath",
                                 elem_id="step-upload", scale=1)
    status = gr.HTML(status_html("Run a comparison on the Compare tab, then press “Show my last run”."),
                     elem_id="step-status")
    focus = gr.HTML("", elem_id="step-focus", visible=False)
    with gr.Row(equal_height=False):
        slider = gr.Slider(0, 1, value=0, step=1, label="Step (0 = the prefill)", elem_id="step-slider", scale=5)
        buttons = [gr.Button(text, elem_id=f"step-{name}", size="sm", scale=1, min_width=width)
                   for text, name, width in (("◀ Previous", "previous", 90), ("Next ▶", "next", 90),
                                             ("Play", "play", 80), ("Pause", "pause", 80))]
    timer = gr.Timer(PLAY_EVERY_S, active=False)
    gr.Markdown(CAPTION, elem_classes="note", elem_id="step-caption")
    gr.HTML(LEGEND_HTML)
    blocks = gr.HTML(EMPTY, elem_id="step-blocks")
    token = gr.Dropdown([], value=None, label="Token (lane · position): its two distributions below",
                        elem_id="step-token", allow_custom_value=False)
    with gr.Row(elem_classes="chart-row"):
        draft_plot = gr.Plot(elem_id="step-draft-dist", show_label=False)
        target_plot = gr.Plot(elem_id="step-target-dist", show_label=False)
    timeline = gr.Plot(elem_id="step-timeline", show_label=False)
    return StepTabView(show_button, upload, status, slider, *buttons, timer, blocks, token, draft_plot, target_plot,
                       timeline, focus)


# --- the behaviour ---------------------------------------------------------------------------------------

def _outputs_of(view: StepView) -> tuple:
    return (view.blocks, view.timeline, gr.update(choices=view.choices, value=view.selected), view.draft_figure,
            view.target_figure)


def _refused(message: str) -> tuple:
    """The status in the error colour; the slider and everything shown stay as they were."""
    return status_html(f"⚠ {message}", error=True), *[gr.skip()] * 6


class StepHandlers:
    """The tab's handlers: plain methods over explicit values. What each session is stepping through, and
    whether it plays, lives in `sessions` (app/run/sessions.py)."""

    def __init__(self, sessions: SessionStore):
        self.sessions = sessions

    def _shown(self, session: str) -> Comparison | None:
        return self.sessions.get(session).shown

    def show(self, comparison: Comparison, session: str, source: str, start: int = 0) -> tuple:
        """Start stepping through `comparison` at step `start`: the status, the slider, and the step's outputs."""
        if self.sessions.get(session).shown is not comparison:
            self.sessions.get(session).shown = comparison
        start = max(0, min(start, last_step(comparison)))
        return (status_html(describe(comparison, source)),
                gr.update(minimum=0, maximum=last_step(comparison), value=start),
                *_outputs_of(step_view(comparison, start, projector=self.sessions.get(session).projector)))

    def redraw_charts(self, session: str, raw_step, selected) -> tuple:
        """The step's timeline and the selected token's two charts drawn again (projector mode turned on or off),
        at the step and token the page shows; skips when nothing is shown."""
        state = self.sessions.get(session)
        if state.shown is None:
            return (gr.skip(),) * 3
        i = step_number(raw_step, last_step(state.shown))
        key = selected if find_token(state.shown, i, selected) else None
        view = step_view(state.shown, i, key, projector=state.projector)
        return view.timeline, view.draft_figure, view.target_figure

    def on_show_last(self, request: gr.Request):
        comparison = self.sessions.get(request.session_hash).last
        return _refused(NO_RUN) if comparison is None else self.show(comparison, request.session_hash, "Your last run")

    def on_upload(self, path, request: gr.Request):
        try:
            if not isinstance(path, str) or not path:
                raise RecordError("no file arrived; open a saved comparison's .json file")
            with open(path, "rb") as f:
                comparison = read_comparison(f.read(MAX_FILE_BYTES + 1), size=os.fstat(f.fileno()).st_size)
        except RecordError as exc:
            return _refused(f"Could not open that file: {exc}")
        except OSError as exc:
            return _refused(f"Could not read that file: {exc.strerror or exc}")
        self.sessions.opened(request.session_hash, comparison)  # bounded like every opened file
        return self.show(comparison, request.session_hash, os.path.basename(path))

    def on_step(self, raw, request: gr.Request):
        """A new step: its first rejected token (else its first draft) is selected."""
        comparison = self._shown(request.session_hash)
        if comparison is None:
            return EMPTY, None, gr.update(choices=[], value=None), None, None
        return _outputs_of(step_view(comparison, step_number(raw, last_step(comparison)),
                                     projector=self.sessions.get(request.session_hash).projector))

    def on_token(self, raw, selected, request: gr.Request):
        comparison = self._shown(request.session_hash)
        if comparison is None:
            return gr.skip(), gr.skip(), gr.skip()
        i = step_number(raw, last_step(comparison))
        key = selected if find_token(comparison, i, selected) else None
        draft, target = distribution_figures(find_token(comparison, i, key), rule_of(comparison))
        projector = self.sessions.get(request.session_hash).projector
        return blocks_html(comparison, i, key), styled(draft, projector), styled(target, projector)

    def _moved(self, raw, by: int, session: str) -> int:
        comparison = self._shown(session)
        last = last_step(comparison) if comparison else 0
        return step_number(step_number(raw, last) + by, last)

    def on_previous(self, raw, request: gr.Request):
        return self._moved(raw, -1, request.session_hash)

    def on_next(self, raw, request: gr.Request):
        return self._moved(raw, +1, request.session_hash)

    def on_play(self, raw, request: gr.Request):
        """Play from the step shown (from step 0 when the last one is shown); the clock starts."""
        state = self.sessions.get(request.session_hash)
        if state.shown is None:
            return gr.skip(), gr.update(active=False)
        last = last_step(state.shown)
        state.playing = last > 0
        return (0 if step_number(raw, last) >= last else gr.skip()), gr.update(active=last > 0)

    def on_pause(self, request: gr.Request):
        self.sessions.get(request.session_hash).playing = False
        return gr.update(active=False)

    def on_tick(self, raw, request: gr.Request):
        state = self.sessions.get(request.session_hash)
        if state.shown is None or not state.playing:  # a tick that reached the server after Pause
            return gr.skip(), gr.update(active=False)
        last = last_step(state.shown)
        following, state.playing = advance(step_number(raw, last), last)
        # Only ever switch the clock off here: switching it on again could undo a Pause pressed mid-tick.
        return following, gr.skip() if state.playing else gr.update(active=False)


def wire(view: StepTabView, handlers: StepHandlers) -> None:
    """Connect the components to the handlers. Nothing here runs a model, so no event waits in the engine's
    queue; the buttons that only move the slider skip the queue altogether."""
    quiet = dict(api_visibility="private", show_progress="hidden")
    shown = [view.status, view.slider, *view.step_outputs]
    view.show_button.click(handlers.on_show_last, None, shown, concurrency_limit=None, **quiet)
    view.upload.upload(handlers.on_upload, [view.upload], shown, concurrency_limit=1, concurrency_id="open-file",
                       **quiet)
    view.slider.change(handlers.on_step, [view.slider], view.step_outputs, preprocess=False, concurrency_limit=None,
                       **quiet)
    view.token.input(handlers.on_token, [view.slider, view.token], [view.blocks, view.draft_plot, view.target_plot],
                     preprocess=False, concurrency_limit=None, **quiet)
    at_once = dict(preprocess=False, queue=False, **quiet)
    view.previous_button.click(handlers.on_previous, [view.slider], [view.slider], **at_once)
    view.next_button.click(handlers.on_next, [view.slider], [view.slider], **at_once)
    view.play_button.click(handlers.on_play, [view.slider], [view.slider, view.timer], **at_once)
    view.pause_button.click(handlers.on_pause, None, [view.timer], queue=False, **quiet)
    view.timer.tick(handlers.on_tick, [view.slider], [view.slider, view.timer], **at_once)


def render(sessions: SessionStore) -> tuple[StepTabView, StepHandlers]:
    """The tab: its layout and its handlers, wired."""
    view, handlers = layout(), StepHandlers(sessions)
    wire(view, handlers)
    return view, handlers
