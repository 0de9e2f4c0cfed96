"""Server lanes on the page: a vLLM or SGLang server's answer beside the local lanes, and its counters.

Pure functions from app/servers/client.py's plain results to HTML (the page's own classes: lane-card, chips,
tokens), then the Gradio part: one box per server in the Compare tab's row of lanes, a handler that asks
every server when Run is pressed (on the same prompt, temperature, seed and max new tokens), and a button
on the About tab that reads each server's /metrics. Only the operator names servers (`--server`); nothing
here takes an address from the page. A comparison's download carries the server lanes' figures that had ended
(its "servers" block, marked as the server's own report); share links and recordings do not.
"""

from __future__ import annotations

import html
import math

import gradio as gr

from ..settings import PARSERS, SettingError
from ..draw.render import visible
from .claims import CLAIM, counter_problems, figure_problems, lane_figures, number, percent
from .client import ServerCounters, ServerLaneResult, ServerRun, ServerSpec, SpecFigures, Timeouts, read_counters
from ..draw.theme import ACCEPTED, UNVERIFIED

REDRAW_EVERY_S = 0.5  # server lanes redraw at most this often (the local lane being measured shares the cores)
KEPT_SESSIONS = 256  # sessions whose latest server answers are kept for their download
MAX_TIMELINE_STEPS = 400  # the step timeline shows the first steps only, past this many
ENGINE_LABELS = {"vllm": "vLLM server", "sglang": "SGLang server", "auto": "server"}
CANNOT_SEE = ("A server reports counts, not tokens: which tokens were drafted, and which the target rejected, "
              "stay on the server.")


def _chip(label: str, value: str, hint: str) -> str:
    return f'<span class="chip" title="{html.escape(hint)}">{label} <b>{html.escape(value)}</b></span>'


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:.0f} ms"


def _timing_chips(lane: ServerLaneResult) -> list[str]:
    where = ("the server's own per-request timing (metrics.time_to_first_token_ms, mean_itl_ms, tokens_per_second)"
             if lane.timing_from == "server" else "measured here, from the streamed answer (network included)")
    rate = "—" if lane.tokens_per_s is None else f"{lane.tokens_per_s:.0f}"
    return [_chip("tokens/s", rate, f"generated tokens / time to the last token; {where}"),
            _chip("TTFT", _ms(lane.ttft_s), f"time to first token; {where}"),
            _chip("TPOT", _ms(lane.tpot_s), f"time per output token after the first; {where}")]


def _spec_chips(spec: SpecFigures, kind: str) -> list[str]:
    source = ("metrics.speculative_decoding" if kind == "vllm" else "meta_info")
    reported = "" if spec.reported_tau is None else f"; the server's own field says {number(spec.reported_tau, 3)}"
    rate = spec.acceptance_rate
    claim = f" ({CLAIM})" if figure_problems(spec) else ""
    return [_chip("τ" + claim, number(spec.tau),
                  f"mean tokens committed per verify step: 1 + accepted drafts / steps, from {source}{reported}"),
            _chip("accepted / drafted" + claim, percent(rate),
                  f"accepted drafted tokens / every drafted token sent to the target, from {source} (not the local "
                  "lanes' acceptance rate, which counts only the drafts the rule judged)"),
            _chip("steps", str(spec.num_steps), f"verify steps the server counted, from {source}")]


def _bar(share: float, colour: str, label: str, title: str) -> str:
    width = max(0.0, min(1.0, share)) * 100
    return (f'<div style="display:flex;align-items:center;gap:.4em" title="{html.escape(title)}">'
            f'<span style="width:5.5em;color:#555">{html.escape(label)}</span>'
            f'<span style="flex:1;background:#eee;height:.7em;border-radius:.2em">'
            f'<span style="display:block;width:{width:.1f}%;height:100%;background:{colour};border-radius:.2em">'
            f'</span></span><span style="width:3em;text-align:right">{percent(share)}</span></div>')


def positions_html(spec: SpecFigures) -> str:
    """Survival by position from the histogram: the share of steps that accepted at least i drafts (the product of
    the conditional acceptances up to i, app/glossary.py)."""
    rates = spec.per_position
    if not rates:
        return '<div class="note">survival by position: the answer has no acceptance histogram</div>'
    rows = "".join(_bar(r, ACCEPTED, f"position {i}",
                        f"steps that accepted at least {i} draft{'' if i == 1 else 's'} / all steps")
                   for i, r in enumerate(rates, 1))
    return (f'<div class="srv-positions" style="font-size:.85em;margin:.4em 0"><b>Survival by position</b> (steps '
            f'whose first k drafts all passed){rows}</div>')


def steps_html(spec: SpecFigures, kind: str) -> str:
    """The accepted count of every step, in order, as a row of bars (vLLM's detailed mode only)."""
    if spec.per_step_accepted is None:
        how = ("start vLLM with --per-request-spec-decode-metrics detailed" if kind == "vllm"
               else "SGLang reports no per-step counts")
        return f'<div class="note">accepted per step: not in this answer ({how})</div>'
    drafted = spec.per_step_drafted or ()
    tallest = max([*drafted, *spec.per_step_accepted, 1])
    bars = []
    for i, accepted in enumerate(spec.per_step_accepted[:MAX_TIMELINE_STEPS]):
        of = f" of {drafted[i]}" if i < len(drafted) else ""
        height = 0.15 + 1.85 * accepted / tallest
        bars.append(f'<span class="srv-step" data-accepted="{accepted}" title="step {i + 1}: accepted {accepted}{of}" '
                    f'style="display:inline-block;width:5px;margin-right:1px;height:{height:.2f}em;'
                    f'background:{ACCEPTED if accepted else UNVERIFIED};vertical-align:bottom"></span>')
    more = (f" (first {MAX_TIMELINE_STEPS} of {len(spec.per_step_accepted)})"
            if len(spec.per_step_accepted) > MAX_TIMELINE_STEPS else "")
    return (f'<div class="srv-steps" style="font-size:.85em;margin:.4em 0"><b>Accepted drafts at each step</b>{more}'
            f'<div style="height:2.1em;display:flex;align-items:flex-end;overflow-x:auto">{"".join(bars)}</div></div>')


def _head(lane: ServerLaneResult) -> str:
    return (f'<div class="lane-card" data-server="{html.escape(lane.name)}" data-state="{html.escape(lane.state)}">'
            f'<div class="lane-head"><span class="lane-name">{html.escape(lane.name)}</span>'
            f'<span class="lane-drafter">{html.escape(ENGINE_LABELS.get(lane.kind, "server"))}</span>'
            f'<span class="lane-desc">what the server reports about its own speculative decoding</span>'
            f'<span class="lane-state">{html.escape(lane.state)}</span></div>')


def server_lane_html(lane: ServerLaneResult, prompt: str = "") -> str:
    """One server lane: header, chips, the one-line error or note, the text, and the server's acceptance."""
    lines = "".join(f'<div class="status-error srv-message">⚠ {html.escape(lane.name)} {visible(m)}</div>'
                    for m in (lane.error, lane.note) if m)
    if lane.state in ("waiting", "running") and not lane.text:
        return f'{_head(lane)}{lines}<div class="tokens"></div></div>'
    ended = lane.state not in ("waiting", "running")
    chips = _timing_chips(lane) if ended and lane.num_tokens else []
    if ended and lane.spec is not None:
        chips += _spec_chips(lane.spec, lane.kind)
        lines += _claim_line(lane.name, figure_problems(lane.spec))
    tokens = (f'<div class="tokens"><span class="prompt-text">{visible(prompt[-300:])}</span>'
              f'<span class="srv-text" data-out>{visible(lane.text)}</span></div>')
    figures = ""
    if ended and lane.spec is not None:
        figures = positions_html(lane.spec) + steps_html(lane.spec, lane.kind)
    if ended:
        figures += f'<div class="note">{html.escape(CANNOT_SEE)}</div>'
    chips_html = f'<div class="chips">{"".join(chips)}</div>' if chips else ""
    return f'{_head(lane)}{chips_html}{lines}{tokens}{figures}</div>'


def counters_html(name: str, counters: ServerCounters | str) -> str:
    """One server's /metrics, or the one line saying why there is nothing to show."""
    title = f'<div class="lane-head"><span class="lane-name">{html.escape(name)}</span></div>'
    if isinstance(counters, str):
        return f'<div class="srv-counters" data-server="{html.escape(name)}">{title}' \
               f'<div class="status-error">⚠ {html.escape(name)} {visible(counters)}</div></div>'
    tau, rate = counters.tau, counters.acceptance_rate
    problems = counter_problems(counters)
    claim = f" ({CLAIM})" if problems else ""
    chips = [_chip("τ" + claim, number(tau), "1 + accepted / drafts over all traffic"
                   if counters.kind == "vllm" else "sglang:spec_accept_length (the latest batch)"),
             _chip("acc. rate" + claim, percent(rate), "accepted / drafted tokens")]
    if counters.num_drafts is not None:
        chips.append(_chip("drafts", f"{counters.num_drafts:.0f}", "vllm:spec_decode_num_drafts_total"))
    rows = "".join(_bar(r, ACCEPTED, f"position {i}", "accepted at this position / drafts")
                   for i, r in enumerate(counters.per_position, 1) if math.isfinite(r))
    since = "since the server started, all requests" if counters.kind == "vllm" else "its latest batch"
    return (f'<div class="srv-counters" data-server="{html.escape(name)}">{title}<div class="chips">{"".join(chips)}</div>'
            f'{_claim_line(name, problems)}<div class="note">{since}</div>'
            f'<div style="font-size:.85em;max-width:36em">{rows}</div></div>')


def _claim_line(name: str, problems: list[str]) -> str:
    """One line naming what does not hold together in a server's figures (nothing when all of it does)."""
    if not problems:
        return ""
    return (f'<div class="status-error srv-claim">⚠ {html.escape(name)}\'s figures do not hold together '
            f'({html.escape("; ".join(problems))}): shown as {CLAIM}, not as a measurement</div>')


# --- on the page ------------------------------------------------------------------------------------------

def empty_html(spec: ServerSpec, state: str = "waiting") -> str:
    return server_lane_html(ServerLaneResult(spec.name, spec.kind, state))


def boxes(specs: list[ServerSpec]) -> list:
    """One box per server, made inside the Compare tab's row of lanes."""
    return [gr.HTML(empty_html(s), elem_id=f"server-{s.name}", min_width=300) for s in specs]


class ServerLaneHandlers:
    """Run: ask every server at once and redraw their boxes as answers stream in. Stop: end yours."""

    def __init__(self, specs: list[ServerSpec], timeouts: Timeouts = Timeouts()):
        self.specs, self.timeouts = list(specs), timeouts
        self.running: dict[str, ServerRun] = {}  # by browser session, only while a run lasts
        self.latest: dict[str, ServerRun] = {}  # by browser session: its latest run, for the comparison's download

    def settings(self, prompt, temperature, max_new_tokens, seed) -> tuple[str, dict]:
        """The comparison's own checks (app/links.py); SettingError names the first bad value."""
        values = dict(temperature=PARSERS["temperature"](temperature), seed=PARSERS["seed"](seed),
                      max_new_tokens=PARSERS["max_new_tokens"](max_new_tokens))
        return PARSERS["prompt"](prompt), values

    def run(self, prompt, temperature, max_new_tokens, seed, request: gr.Request):
        try:
            text, settings = self.settings(prompt, temperature, max_new_tokens, seed)
        except SettingError:
            yield [empty_html(s, "not run: a setting is out of range") for s in self.specs]
            return
        session = getattr(request, "session_hash", None) or "anonymous"
        run = self.running[session] = ServerRun(self.specs, text, settings, self.timeouts)
        self.latest.pop(session, None)
        self.latest[session] = run
        while len(self.latest) > KEPT_SESSIONS:  # the oldest sessions' runs go first
            self.latest.pop(next(iter(self.latest)))
        try:
            shown = None
            while True:
                ended = not run.running()  # read before drawing, so the last drawing shows the lanes' end
                drawn = [server_lane_html(lane, text) for lane in run.lanes]
                if drawn != shown:
                    shown = drawn
                    yield drawn
                if ended:
                    break
                run.wait(REDRAW_EVERY_S)
        finally:
            run.stop.set()
            self.running.pop(session, None)

    def figures(self, session: str | None) -> dict:
        """The session's latest server answers that have ended, by server, as a comparison file keeps them."""
        run = self.latest.get(session or "anonymous")
        return {} if run is None else {lane.name: lane_figures(lane) for lane in run.lanes
                                       if lane.state not in ("waiting", "running")}

    def stop(self, request: gr.Request):
        run = self.running.get(getattr(request, "session_hash", None) or "anonymous")
        if run is not None:
            run.stop.set()

    def counters(self) -> str:
        parts = [counters_html(s.name, read_counters(s, self.timeouts)) for s in self.specs]
        return "".join(parts)


def wire(view, handlers: ServerLaneHandlers) -> None:
    """Run and Stop on the Compare tab also start and stop the server lanes (their own queue: servers answer
    at once, whatever the local engine is doing)."""
    quiet = dict(api_visibility="private", show_progress="hidden")
    inputs = [view.prompt, view.controls["temperature"], view.controls["max_new_tokens"], view.controls["seed"]]
    view.run_button.click(handlers.run, inputs=inputs, outputs=view.server_boxes, preprocess=False,
                          concurrency_limit=4, concurrency_id="servers", api_name="server_lanes", **quiet)
    view.stop_button.click(handlers.stop, inputs=None, outputs=None, queue=False, **quiet)


def about_section(handlers: ServerLaneHandlers) -> None:
    """The About tab's part: each server's server-wide counters from its /metrics, read on request."""
    names = ", ".join(s.name for s in handlers.specs)
    gr.Markdown(f"### Servers\nServer lanes on the Compare tab: {names}. Their server-wide counters, over all "
                "the traffic each server has served (vLLM's `vllm:spec_decode_*` counters; SGLang's "
                "`sglang:spec_accept_*` gauges, which cover its latest batch):")
    button = gr.Button("Read the servers' counters", size="sm", elem_id="server-counters-read")
    shown = gr.HTML("", elem_id="server-counters")
    button.click(handlers.counters, inputs=None, outputs=shown, concurrency_limit=2, concurrency_id="server-metrics",
                 api_visibility="private", show_progress="hidden")
