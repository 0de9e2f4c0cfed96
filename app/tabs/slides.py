"""The lesson as slides, for a projector: one point a screen, its claim, its evidence and its takeaway.

`?lesson=N&present=1` opens point N as a slide in place of the page (`?lesson=N` without it opens the point in its
tab). A slide holds, in one 1024×768 screen: the point's claim in one line, the chart its "Show me" names drawn large
for a room, and its takeaway with the numbers (app/lesson), from the lesson's recording, so a class sees the same
numbers every time; point 3 also carries the p/q widget (app/draw/overlap.py). The arrow keys and a clicker's Page Up /
Page Down move between points, and the address follows, so each slide can be linked. "Run it live" measures the
point again on this machine and puts the live numbers on the slide, saying so; its Stop ends it as the page's Stop does (withdrawn while it waits in the queue,
stopped within a quarter of a second once it runs), and the slide keeps the recording and says which.

Like a tab: `layout` builds the components, `SlideHandlers` holds the handlers as plain methods, `wire` connects
them. The page's half (hiding the rest of the page, the keys, the address) is STYLE and SCRIPT in the page's head.
"""

from __future__ import annotations

import html
import math
import re
import threading
from dataclasses import dataclass

import gradio as gr
import plotly.graph_objects as go

from .. import lesson
from ..draw import overlap
from ..draw.evidence import NAMES_ITS_SOURCES, slide_figure
from ..draw.layout import PROJECTOR_FONT, PROJECTOR_TITLE_FONT
from ..draw.charts import (budget_figure, comparison_figure, for_projector, load_figure, lossless_figure,
                           parts_figure, sweeps_figure, temperature_acceptance_figure)
from ..lesson import POINTS, Point
from ..lesson.choice import rule_words
from ..lesson.kv import kv_item
from ..draw.long import long_figure
from ..lesson.stamps import SOURCE_NAMES, slide_sources
from ..theory import PUBLISHED_LOAD
from ..comparison import Comparison
from ..draw.render import status_html
from ..run.sessions import SessionStore
from ..draw.theme import BONUS
from .compare import as_sent
from .lesson import LessonHandlers

PARAMETER = "present"  # ?present=1 shows the lesson as slides (app/links.py PAGE_PARAMETERS)
WIDGET_POINT = 3  # the point whose slide carries the p/q widget: the ceiling 1 − TV
LIVE_WORDS = "measured live just now"  # a chart redrawn from a live measurement alone
# The slides whose chart shows one prompt alone, titled with which prompt and the rule that chose it (app/lesson/choice.py)
ONE_PROMPT_CHARTS = (7,)

# The Why tab's charts a point may name, each drawn from its recording's data (the tab draws the same: app/tabs/why.py)
WHY_CHARTS = {"why-sweep": lambda data: sweeps_figure(data["sweeps"]), "why-check-plot": lossless_figure,
              "why-parts-plot": parts_figure, "why-temperatures-plot": temperature_acceptance_figure,
              "why-trees-plot": budget_figure, "why-load-plot": lambda data: load_figure(data, PUBLISHED_LOAD),
              "why-long-plot": lambda data: long_figure({"data": data})}


def evidence_figure(point: Point, data: dict, live: bool = False) -> go.Figure | None:
    """The chart the point names (`Point.chart`), drawn for a room from `data` (the recordings, or a live measurement
    in its recording's place: live); None when its recording is missing. Its height is the slide's to set. Redrawn
    live, each panel or mark drawn from another recording says "recorded", the rest "live" (evidence.source_tag); a
    chart of the live measurement alone says so in its subtitle."""
    item = data.get(point.recording)
    if item is None:
        return None
    # a chart of the slide's own where the tab's does not show its claim
    own = slide_figure(point.number, data, point.recording if live else None)
    if own is not None:
        figure = for_projector(own)
    elif point.tab == "compare":
        figure = comparison_figure(item, point.chart, projector=True)
    else:
        figure = for_projector(WHY_CHARTS[point.chart](item["data"]))
    if point.number in ONE_PROMPT_CHARTS and isinstance(item, Comparison):  # one prompt alone: which, by what rule
        prompt = str(item.settings.get("prompt", ""))
        title = f"One prompt's timeline: {rule_words(prompt, short=True)}"
        subtitle = ("the prompt of every one-prompt figure here, chosen by its speedups" if "median" in title else
                    "the prompt of every one-prompt figure here, fixed before measuring")
        figure.update_layout(title=dict(text=title, subtitle=dict(text=subtitle, font=dict(size=PROJECTOR_FONT)),
                                        font=dict(size=PROJECTOR_TITLE_FONT), x=0, xanchor="left", xref="container",
                                        y=0.98, yanchor="top", yref="container", automargin=True))
    if live and (own is None or point.number not in NAMES_ITS_SOURCES):
        subtitle = figure.layout.title.subtitle.text
        if not figure.layout.title.text:  # a chart with no title of its own (the timeline): the words are its title
            figure.layout.title.text = LIVE_WORDS
        else:
            figure.layout.title.subtitle.text = f"{LIVE_WORDS}; {subtitle}" if subtitle else LIVE_WORDS
    figure.layout.height = None  # the slide's stylesheet gives the chart the screen's height that is left
    if point.number == WIDGET_POINT:  # half the screen wide
        fit_title(figure, HALF_TITLE_CHARS)
    return figure


HALF_TITLE_CHARS = 30  # characters of a projector chart's title that fit half a 1024-pixel slide


def fit_title(figure: go.Figure, chars: int) -> None:
    """A title longer than `chars` characters: its words before a colon (or the first that fit) stay the title, the
    rest opens its subtitle (plotly places a title of several lines above its own anchor, out of the figure)."""
    text = figure.layout.title.text or ""
    if len(text) <= chars:
        return
    colon = text.find(": ")
    head = text[:colon] if 0 < colon <= chars else text[:chars + 1].rsplit(" ", 1)[0]
    rest, subtitle = text[len(head):].lstrip(": "), figure.layout.title.subtitle.text
    figure.layout.title.text = head
    figure.layout.title.subtitle.text = f"{rest}. {subtitle}" if subtitle else rest


def claim_html(point: Point, data: dict | None = None) -> str:
    """The slide's head: which point of how many, and its claim (the page's script fits it to one line)."""
    return (f'<div class="slide-claim" data-point="{point.number}"><span class="slide-count">{point.number} / '
            f'{len(POINTS)}</span><h2>{html.escape(lesson.slide_claim(point, data))}</h2></div>')


def _source(key: str, data: dict):
    return kv_item(data) if key == "kv" else data.get(key)


def source_words(point: Point, data: dict, live: bool = False) -> str:
    """Where the slide's numbers come from, recording by recording: each one's provenance ("recorded 2026-12-06 on
    build …, cpu, 1 thread"), or for the one just measured live, "measured live"; recordings of the same words said
    once ("one prompt at T = 0: measured live on cpu, each lane run twice; the K sweep and DSpark's parts: recorded
    …")."""
    said: dict[str, list[str]] = {}
    for key in slide_sources(point.number, point.recording):
        item = _source(key, data)
        if item is None:
            continue
        if live and key == point.recording:
            words = (f"measured live on {item.device}, each lane run {lesson.times_words(item.timing_runs)}"
                     if isinstance(item, Comparison) else lesson.recorded_words(item))
        else:
            words = lesson.recorded_words(item)
        said.setdefault(words, []).append(SOURCE_NAMES.get(key, key))
    if not said:
        return "not recorded yet"
    if len(said) == 1:
        return next(iter(said))
    return "; ".join(f"{' and '.join(names)}: {words}" for words, names in said.items())


def takeaway_html(point: Point, data: dict, live: bool = False) -> str:
    """The slide's takeaway computed from `data` (its key numbers, short), with where they come from (source_words),
    and the way back to the page, where the full takeaway is."""
    where = source_words(point, data, live)
    return (f'<div class="slide-takeaway"><b>Here:</b> {html.escape(lesson.takeaway(point, data, slide=True))} '
            f'<span class="slide-source">({html.escape(where)}; <a href="?lesson={point.number}">this point in '
            'the page</a>)</span></div>')


def plain_words(value) -> str:
    """A status line's words, its HTML dropped."""
    return html.unescape(re.sub(r"<[^>]+>", "", value)).strip() if isinstance(value, str) else ""


def one_line(text: str) -> str:
    """A message's first sentence, without what it says of the page's panel: one line on a slide."""
    text = re.sub(r"[:;,]?\s*the panel shows what it showed before", "", text)
    return text.split(". ")[0].rstrip(". ")


def parse_number(value) -> int | None:
    """A slide number from a link or the page's script: ASCII digits, few, 1 to len(POINTS); else None."""
    text = str(value)
    if text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= len(POINTS):
        return int(text)
    return None


def slide_number(value) -> int | None:
    """The slide the page's script (or an API client) asks for, whatever it sent: a whole number (an int, a float
    that is one, or its digits) from 1 to len(POINTS); else None. Never raises."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        value = int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        value = value.strip()
    return parse_number(value) if isinstance(value, (int, str)) else None


def first_values(request) -> dict[str, str]:
    """The page's query parameters, each its first value, as the page's own script reads them (URLSearchParams.get),
    so the page and the server agree on `?present=1&present=0`."""
    params = getattr(request, "query_params", None)
    items = (params.multi_items() if hasattr(params, "multi_items") else dict(params or {}).items())
    first: dict[str, str] = {}
    for name, value in items:
        first.setdefault(str(name), str(value))
    return first


@dataclass
class SlideView:
    claim: gr.HTML
    chart: gr.Plot
    widget: gr.HTML
    takeaway: gr.HTML
    status: gr.HTML
    number: gr.Number  # the slide the page's script asks for (hidden)
    previous: gr.Button
    next: gr.Button
    live: gr.Button
    stop: gr.Button

    @property
    def outputs(self) -> list:
        """In the order `SlideHandlers.slide` returns their values."""
        return [self.claim, self.chart, self.widget, self.takeaway, self.status]


def layout() -> SlideView:
    """Build the slide's components (inside a gr.Blocks); the page's stylesheet shows them only when presenting."""
    with gr.Column(elem_id="slides"):
        claim = gr.HTML(elem_id="slide-claim")
        with gr.Row(elem_id="slide-evidence", equal_height=False):
            chart = gr.Plot(elem_id="slide-chart", show_label=False)
            widget = overlap.widget("slide-widget")
        takeaway = gr.HTML(elem_id="slide-takeaway")
        with gr.Row(elem_id="slide-bar"):
            previous = gr.Button("← Previous", size="sm", elem_id="slide-prev", scale=0, min_width=120)
            following = gr.Button("Next →", size="sm", elem_id="slide-next", scale=0, min_width=120)
            live = gr.Button("Run it live", size="sm", variant="primary", elem_id="slide-live", scale=0,
                             min_width=140)
            stop = gr.Button("Stop", size="sm", variant="stop", elem_id="slide-stop", scale=0, min_width=90)
            status = gr.HTML(elem_id="slide-status")
        number = gr.Number(visible=False, precision=0, elem_id="slide-number")
    return SlideView(claim, chart, widget, takeaway, status, number, previous, following, live, stop)


class SlideHandlers:
    """Each handler returns a value for every component in `SlideView.outputs`."""

    def __init__(self, recordings: dict, sessions: SessionStore, lesson_handlers: LessonHandlers):
        self.recordings, self.sessions, self.lesson = recordings, sessions, lesson_handlers
        self.ahead, self.ahead_lock = False, threading.Lock()  # whether the recorded slides are drawn ahead yet

    def recorded_slide(self, number: int) -> tuple:
        """Slide `number`'s chart (as Gradio sends it) and takeaway from the recordings, drawn once for every visitor.
        The first time any slide is asked for, the others are drawn in a background thread, the following ones
        first, so that each next slide shows at once whatever the server is doing then; nothing is drawn before a
        slide is first asked for (building the app draws none)."""
        point = POINTS[number - 1]
        drawn = self.sessions.replays.get(f"slide|{number}", self.recordings, lambda: (
            as_sent(evidence_figure(point, self.recordings)), takeaway_html(point, self.recordings)))
        with self.ahead_lock:
            start, self.ahead = not self.ahead, True
        if start:
            rest = [n for n in range(number + 1, len(POINTS) + 1)] + list(range(1, number))
            threading.Thread(target=lambda: [self.recorded_slide(n) for n in rest], name="speclab-slides-ahead",
                             daemon=True).start()
        return drawn

    def slide(self, number: int, data: dict | None = None, live: bool = False, status: str = "") -> tuple:
        """Point `number` as a slide, from `data` (default the recordings: recorded_slide); status: one line under
        it."""
        point = POINTS[number - 1]
        if data is None:
            figure, takeaway = self.recorded_slide(number)
        else:
            figure, takeaway = evidence_figure(point, data, live), takeaway_html(point, data, live)
        return (claim_html(point, data), figure, gr.update(visible=True if number == WIDGET_POINT else "hidden"),
                takeaway, status_html(status, error=status.startswith("⚠")) if status else "")

    def on_load(self, request: gr.Request):
        """`present=1`: the slide of the link's `lesson=N` (the first without one; a bad N, the first and one line).
        Without it nothing changes (the Lesson tab answers a bad `present`)."""
        params = first_values(request)
        if params.get(PARAMETER) != "1":
            return (gr.skip(),) * 5
        asked = params.get("lesson")
        number = 1 if asked is None else parse_number(asked)
        if number is None:
            return self.slide(1, status=f"⚠ this link asks for lesson point {asked[:20]!r}; there are points 1 "
                                        f"to {len(POINTS)}")
        return self.slide(number)

    def on_move(self, number):
        """The slide the page's script asks for (the keys, the buttons); one out of range stays where it was."""
        number = slide_number(number)
        return self.slide(number) if number else (gr.skip(),) * 5

    def on_press(self, number, request: gr.Request):
        """"Run it live" pressed (outside the queue): the press is the session's, so a Stop while the measurement
        waits in the queue withdraws it, as on the page."""
        if slide_number(number):
            self.sessions.get(request.session_hash).press_run()

    def on_stop(self, request: gr.Request):
        """Stop: the page's own (the session's stop event): the measurement running ends within a quarter of a
        second, one still waiting in the queue is withdrawn."""
        self.lesson.compare.run.on_stop(request)

    def run_live(self, number, request: gr.Request):
        """The point measured again here (the Lesson's "Run it live"), then its slide from the live numbers; stopped
        or withdrawn, the recording's slide and one line saying so."""
        asked = slide_number(number)
        if asked is None:
            raise gr.Error(f"there is no slide {str(number)[:20]!r}: the slides are numbered 1 to {len(POINTS)}",
                           print_exception=False)
        point = POINTS[asked - 1]
        state = self.sessions.get(request.session_hash)
        before = self._live(point, state)
        yield self.slide(point.number, status="measuring live on this machine (Stop ends it); the slide shows the "
                                               "recording until it ends")
        last = None
        try:
            for last in self.lesson.run_live(point.number, request):
                pass  # the measurement runs through the Lesson's own handler, which keeps it in the session
        except gr.Error as exc:  # a Why measurement: withdrawn, stopped or refused, in one line
            yield self.slide(point.number, status=f"⚠ {one_line(exc.message)}; the slide shows the recording")
            return
        said = plain_words(last[0]) if point.tab == "compare" and last else ""
        if said.startswith(("withdrawn", "stopped")):  # a comparison: its status line says how it ended
            yield self.slide(point.number, status=f"⚠ {one_line(said)}; the slide shows the recording")
            return
        measured = self._live(point, state)
        if measured is None or measured is before:
            yield self.slide(point.number, status="⚠ the live measurement did not finish; the slide shows the "
                                                  "recording")
            return
        yield self.slide(point.number, {**self.recordings, point.recording: measured}, live=True,
                         status="measured live on this machine just now")

    @staticmethod
    def _live(point: Point, state):
        """The session's latest live measurement of the point's kind: its last comparison, or its Why panel."""
        return state.last if point.tab == "compare" else state.panels.get(point.recording)


# The page's half. Presenting is the <html> element's class, set from the address before the page draws, so the
# rest of the page never shows on a slide; a slide fills the screen, its chart taking what the text leaves.
STYLE = f"""
#slides {{ display: none !important; }}
html.present #page, html.present footer {{ display: none !important; }}
html.present, html.present body {{ overflow: hidden; }}
html.present .gradio-container, html.present .gradio-container .main {{ padding: 0 !important; margin: 0 !important;
                                                                        max-width: none !important; }}
html.present #slides {{ display: flex !important; flex-direction: column; flex-wrap: nowrap; gap: 8px;
                        height: 100vh; box-sizing: border-box; padding: 12px 20px; font-size: 20px; }}
#slides .slide-claim {{ display: flex; align-items: baseline; gap: .8em; }}
#slides .slide-claim h2 {{ margin: 0; font-size: 28px; line-height: 1.2; white-space: nowrap; flex: 1 1 0;
                           min-width: 0; overflow: hidden; text-overflow: ellipsis; }}
#slides .slide-count {{ color: #666; font-size: 18px; white-space: nowrap; }}
#slide-evidence {{ flex: 1 1 0; min-height: 0; flex-wrap: nowrap; gap: 12px; }}
#slide-evidence > * {{ min-width: 0; }}
#slide-chart {{ flex: 1 1 0; height: 100%; }}
#slide-chart > div, #slide-chart .js-plotly-plot {{ height: 100%; }}
#slide-widget {{ flex: 1 1 0; }}
#slides .slide-takeaway {{ flex: 0 0 auto; font-size: 20px; line-height: 1.3; }}
#slides .slide-takeaway .slide-source {{ color: #666; }}
#slide-bar {{ flex: 0 0 auto; align-items: center; gap: 12px; }}
#slide-bar button {{ font-size: 18px; }}
#slide-status, #slide-status :is(.note, .status-error, .prose, p, div) {{ font-size: 18px !important; }}
html.present #token-pin {{ display: none; }}
.slide-claim h2 {{ border-left: 6px solid {BONUS}; padding-left: .4em; }}
"""

SCRIPT = """
<script>
(() => {
  const COUNT = %d, PARAMETER = "%s";
  const present = new URLSearchParams(window.location.search).get(PARAMETER) === "1";
  document.documentElement.classList.toggle("present", present);
  const shown = () => Number(document.querySelector("#slides .slide-claim")?.dataset.point || 1);
  // the buttons' script: the slide `step` away from the one shown, kept within the deck
  window.speclabSlide = (step) => Math.min(COUNT, Math.max(1, shown() + step));
  // once a slide is shown: the address names it, and its claim shrinks (down to 18 px) until it fits one line
  window.speclabSlideShown = () => {
    if (!document.documentElement.classList.contains("present")) return;
    const address = new URL(window.location.href);
    address.searchParams.set("lesson", String(shown()));
    address.searchParams.set(PARAMETER, "1");
    window.history.replaceState(null, "", address.toString());
    const claim = document.querySelector("#slides .slide-claim h2");
    if (!claim) return;
    claim.style.fontSize = "";
    for (let size = 28; claim.scrollWidth > claim.clientWidth && size > 18; size--) claim.style.fontSize = size + "px";
    window.dispatchEvent(new Event("resize"));  // plotly refits the chart to the room the text left it
  };
  // → and Page Down (a clicker's "next") move on, ← and Page Up back; not while typing or dragging a widget's bar
  document.addEventListener("keydown", (event) => {
    if (!document.documentElement.classList.contains("present") || event.altKey || event.ctrlKey || event.metaKey) return;
    const step = {ArrowRight: 1, PageDown: 1, ArrowLeft: -1, PageUp: -1}[event.key];
    if (!step || event.target.closest("input, textarea, select, [contenteditable], .pq-bar")) return;
    event.preventDefault();
    // at either end of the deck a key moves nothing, so it asks nothing: a move still being answered would make
    // the page ignore the next key (a click is not sent again while its last is pending)
    if (window.speclabSlide(step) === shown()) return;
    document.getElementById(step > 0 ? "slide-next" : "slide-prev").click();
  });
})();
</script>
""" % (len(POINTS), PARAMETER)

HEAD = f"<style>{STYLE}</style>{SCRIPT}"


def wire(view: SlideView, handlers: SlideHandlers, demo: gr.Blocks) -> None:
    quiet = dict(api_visibility="private", show_progress="hidden")
    shown = dict(fn=None, inputs=None, outputs=None, js="() => window.speclabSlideShown()")
    for button, step in ((view.previous, -1), (view.next, 1)):
        button.click(handlers.on_move, [view.number], view.outputs, js=f"() => window.speclabSlide({step})",
                     queue=False, preprocess=False, **quiet).then(**shown)
    view.live.click(handlers.on_press, [view.number], None, js="() => window.speclabSlide(0)", queue=False,
                    preprocess=False, **quiet) \
        .then(handlers.run_live, [view.number], view.outputs, js="() => window.speclabSlide(0)",
              concurrency_limit=1, concurrency_id="engine", preprocess=False, **quiet).then(**shown)
    view.stop.click(handlers.on_stop, None, None, queue=False, **quiet)
    demo.load(handlers.on_load, None, view.outputs, queue=False, **quiet).then(**shown)

