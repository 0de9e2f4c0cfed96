"""Projector mode and pinned token details: the page as a room sees it.

A room cannot see a tooltip, and the back row cannot read 14-pixel type. Projector mode (a toggle at the top of
the page, or `?projector=1` in any link) sets larger type, puts at most two lanes in a row and folds away the
drafts that did not enter the output (rejected, never verified, cut) until "Show drafts" is pressed, and a long
tab's tables and secondary charts behind a button under each panel's chart (`folded`). Clicking
anything that carries hover text — a token, a chip, a mark — pins that text in a panel on the page, large, where
it stays until closed or replaced: a lecturer can point at it, and a screenshot keeps it.

The type, the lanes and the pins are the browser's: CSS and a small script, no server round trip, so they work
on a recorded replay, a running comparison and a saved file alike. The charts are not: plotly lays out their
text itself, so the toggle also tells the server, which keeps the mode in the session (app/run/sessions.py) and
draws every chart through its own layout for a room (app/draw/layout.py for_projector), the ones shown now at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import gradio as gr

from .theme import ACCEPTED, BONUS

PARAMETER = "projector"  # ?projector=1 opens the page in projector mode (app/links.py PAGE_PARAMETERS)

CSS = f"""
body.projector .gradio-container {{ font-size: 20px; max-width: none !important; }}
body.projector .gradio-container .prose, body.projector .gradio-container label span,
body.projector .note {{ font-size: 20px; }}
body.projector .gradio-container label .info-text {{ font-size: 18px; }}  /* a control's note (Gradio's info=) */
body.projector #compare-lanes {{ display: grid !important; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 1em; }}
body.projector .lane-name {{ font-size: 1.5em; }}
body.projector .chip {{ font-size: 1.1em; }}
body.projector .tokens {{ font-size: 1.05em; max-height: 22em; line-height: 1.7; }}
body.projector .gradio-container button, body.projector .gradio-container textarea,
body.projector .gradio-container input, body.projector .gradio-container [role="tab"] {{ font-size: 20px !important; }}
body.projector:not(.drafts-shown) .tok.ghost, body.projector:not(.drafts-shown) .cutmark {{ display: none; }}
body.projector .chart-row {{ flex-direction: column !important; flex-wrap: nowrap !important; }}
/* Nothing a room reads under 18 px: the page's own small print and Gradio's labels, slider ends and folds. */
body.projector .gradio-container :is(.legend, .steps, .note, .cutmark, .chip .tag, .lane-desc, .lane-drafter,
  .lane-state, .sameness, .st-summary, .st-context, .st-pos, .st-rule, .tok.ghost, .focus-note, .min_value,
  .max_value, [data-testid="block-info"], .label-wrap span, .label, .prose, .prose *),
body.projector footer * {{ font-size: max(18px, 1em) !important; }}
body.projector .st-tree svg {{ zoom: 1.5; }}  /* a draft tree's 12-pixel labels at 18 px: it scrolls in its box */
body.projector .chart-row > * {{ width: 100% !important; min-width: 100% !important; }}
.steps td.num, .chip b, .prose td:not(:first-child) {{ white-space: nowrap; }}
body.projector .prose td:not(:first-child) {{ white-space: normal; }}
body.projector .prose td, body.projector .prose th {{ overflow-wrap: normal; word-break: normal; }}
.prose th {{ overflow-wrap: normal; word-break: normal; hyphens: none; }}  /* a header breaks at its spaces only */
body.projector .prose td:first-child, body.projector .prose th:first-child {{ min-width: 7em; }}
#copy-confirm {{ color: {ACCEPTED}; font-weight: 600; font-size: .9em; text-align: center; }}
#copy-confirm[hidden] {{ display: none; }}
.lesson-target {{ outline: 4px solid {BONUS}; outline-offset: 4px; border-radius: .4em; }}
#show-drafts-toggle, .more-toggle {{ display: none; }}
body.projector #show-drafts-toggle, body.projector .more-toggle {{ display: inline-block; }}
.more-toggle {{ cursor: pointer; align-self: flex-start; }}
.pinnable {{ cursor: pointer; }}
#token-pin {{ position: fixed; right: 1em; bottom: 1em; z-index: 1000; max-width: min(36em, 90vw);
             background: white; border: 2px solid {BONUS}; border-radius: .5em; padding: .6em .9em;
             box-shadow: 0 4px 16px #0003; font-size: 16px; }}
body.projector #token-pin {{ font-size: 22px; }}
#token-pin[hidden] {{ display: none; }}
body.pinned {{ padding-bottom: 14em; }}
#token-pin .pin-head {{ display: flex; justify-content: space-between; gap: 1em; font-weight: 700; }}
#token-pin .pin-token {{ font-family: ui-monospace, monospace; white-space: pre; }}
#token-pin .pin-text {{ white-space: pre-wrap; font-family: ui-monospace, monospace; margin: .3em 0 0;
                        font-size: .9em; }}
#token-pin button {{ border: 1px solid #ccc; border-radius: .3em; background: #f5f5f5; cursor: pointer; }}
"""

# Runs once per page (gr.Blocks' head): one listener for the whole page, so tokens drawn later (a lane that
# ends, a replay, a file opened) are pinnable without any script of their own.
SCRIPT = """
<script>
(() => {
  const PINNABLE = ".tok[title], .chip[title], .sameness[title], .cutmark[title], .lane-drafter[title]";
  function panel() {
    let pin = document.getElementById("token-pin");
    if (pin) return pin;
    pin = document.createElement("div");
    pin.id = "token-pin";
    pin.hidden = true;
    pin.setAttribute("role", "status");
    pin.innerHTML = '<div class="pin-head"><span>Pinned: <span class="pin-token"></span></span>' +
                    '<button type="button" aria-label="close">close ✕</button></div><div class="pin-text"></div>';
    pin.querySelector("button").addEventListener("click", () => show(pin, false));
    document.body.appendChild(pin);
    return pin;
  }
  function show(pin, on) {  // while a panel is pinned the page gets room below, so it covers nothing
    pin.hidden = !on;
    document.body.classList.toggle("pinned", on);
  }
  window.speclabClearPins = () => {  // a new run, setting or tab: what was pinned belongs to the old one
    const pin = document.getElementById("token-pin");
    if (pin && !pin.hidden) show(pin, false);
  };
  document.addEventListener("keydown", (event) => {
    const pin = document.getElementById("token-pin");
    if (event.key === "Escape" && pin && !pin.hidden) show(pin, false);
  });
  document.addEventListener("click", (event) => {
    if (event.target.closest("#show-drafts-toggle")) {
      document.body.classList.toggle("drafts-shown");
      return;
    }
    if (event.target.closest('[role="tab"]')) {
      for (const wait of [100, 600]) setTimeout(refit, wait);
    }
    const more = event.target.closest(".more-toggle");
    if (more) {
      unfold(more.dataset.more, !document.body.classList.contains(`more-${more.dataset.more}`));
      return;
    }
    if (event.target.closest("#run") && document.body.classList.contains("projector")) {
      // a room watches the lanes, not the controls: once the run's first lane is drawn, bring the lanes to the top
      const started = Date.now();
      const tick = () => {
        const lanes = document.getElementById("compare-lanes");
        if (lanes && lanes.querySelector(".lane-card")) lanes.scrollIntoView({block: "start"});
        else if (Date.now() - started < 30000) setTimeout(tick, 200);
      };
      setTimeout(tick, 300);
      return;
    }
    const link = event.target.closest("a");
    if (link) {  // a link to another view of this page keeps projector mode
      if (document.body.classList.contains("projector") && (link.getAttribute("href") || "").startsWith("?")) {
        const address = new URL(link.href);
        address.searchParams.set("projector", "1");
        link.href = address.toString();
      }
      return;
    }
    const item = event.target.closest(PINNABLE);
    if (!item) return;
    const pin = panel();
    pin.querySelector(".pin-token").textContent = item.textContent.trim().slice(0, 60);
    pin.querySelector(".pin-text").textContent = item.getAttribute("title");
    show(pin, true);
  });
  document.addEventListener("mouseover", (event) => {
    const item = event.target.closest && event.target.closest(PINNABLE);
    if (item) item.classList.add("pinnable");
  });
  // A lesson point's Show me (or ?lesson=N): once its tab has drawn the chart, scroll it into view and outline it;
  // again a little later, since charts above it may still be growing as plotly draws them.
  // A panel's table and secondary charts, folded in projector mode (folded below): the page's class says which are
  // open, so a redraw of the panel keeps it; plotly refits the charts that were folded to the room they now have.
  function unfold(chart, on) {
    document.body.classList.toggle(`more-${chart}`, on);
    if (on) setTimeout(refit, 50);
  }
  // A chart drawn while hidden (a tab not shown, a folded panel: a redraw for projector mode, a lesson point's
  // update) was laid out at plotly's default size, its tick angles chosen for that and kept by plotly on a resize:
  // once it shows, each such chart is drawn afresh in the room it has.
  function refit() {
    for (const chart of document.querySelectorAll(".js-plotly-plot")) {
      const svg = chart.querySelector(".main-svg");
      if (!window.Plotly || !svg || chart.offsetParent === null || !chart._fullLayout) continue;
      if (Math.abs(svg.getBoundingClientRect().width - chart.getBoundingClientRect().width) > 4)
        window.Plotly.newPlot(chart, chart.data, chart.layout, chart._context);
    }
  }
  // One draw per new value of a chart, and only once it is near the screen. Gradio's Plot re-creates its plotly
  // component for every new value, and the component it replaces draws that value too before it leaves the page, so
  // each chart was drawn twice (docs/experiments.md). Each draw waits for the end of the task that asked for it, and
  // a chart that has left the page by then is not drawn. A chart on a tab not shown, in a folded panel or more than a
  // screen below the view keeps only its newest value, drawn when it comes near (a run's updates drew every chart
  // of the page, most of them out of sight). Printing draws them all first. The page counts the draws it makes.
  window.speclabChartDraws = 0;
  const waiting = new Map();  // chart -> [its newest arguments for plotly's react, the promises' resolvers]
  const near = (div) => {
    if (div.offsetParent === null) return false;
    const box = div.getBoundingClientRect();
    return box.bottom > -innerHeight && box.top < 2 * innerHeight;
  };
  function drawWaiting(div) {
    const [args, settled] = waiting.get(div);
    waiting.delete(div);
    nearby.unobserve(div);
    div.style.minHeight = "";
    div.classList.remove("chart-waiting");
    window.speclabChartDraws += 1;
    react.call(plotly, div, ...args).then((drawn) => settled.forEach(([resolve]) => resolve(drawn)),
                                          (error) => settled.forEach(([, reject]) => reject(error)));
  }
  const nearby = new IntersectionObserver((seen) => {
    for (const entry of seen) if (entry.isIntersecting && waiting.has(entry.target)) drawWaiting(entry.target);
  }, {rootMargin: "100% 0px"});
  window.addEventListener("beforeprint", () => [...waiting.keys()].forEach(drawWaiting));
  let plotly, react;  // the library, and its own react (wrapped below)
  Object.defineProperty(window, "Plotly", {configurable: true, enumerable: true, get: () => plotly, set: (library) => {
    plotly = library;
    if (!library || library.speclabDrawsOnce) return;
    react = library.react;
    library.react = (chart, ...args) => new Promise((resolve, reject) => setTimeout(() => {
      const div = typeof chart === "string" ? document.getElementById(chart) : chart;
      if (!div || !div.isConnected) {
        resolve(div);
        return;
      }
      const settled = waiting.has(div) ? waiting.get(div)[1] : [];
      waiting.set(div, [args, [...settled, [resolve, reject]]]);
      if (near(div)) {
        drawWaiting(div);
        return;
      }
      // its room kept meanwhile, so the page does not grow under the reader as charts come near and draw
      if (!div.querySelector(".main-svg")) div.style.minHeight = `${(args[1] && args[1].height) || 450}px`;
      div.classList.add("chart-waiting");
      nearby.observe(div);
    }, 0));
    library.speclabDrawsOnce = true;
  }});
  // The late scrolls never move the page under a visitor's hand: once they scroll, press or type, they stop.
  let movedAt = -1;
  for (const kind of ["wheel", "touchstart", "keydown", "mousedown"])
    document.addEventListener(kind, () => { movedAt = performance.now(); }, {capture: true, passive: true});
  window.speclabFocus = (id) => {
    clearFocus();
    unfold(id, true);  // a lesson point shows its chart's whole panel
    const started = Date.now();
    let neared = false;
    const tick = () => {
      const chart = document.getElementById(id);
      const shown = chart && chart.offsetParent !== null, drawn = shown && chart.querySelector(".main-svg");
      if (!drawn) {
        if (shown && !neared) {  // a chart far down the page is drawn once it comes near: bring it near
          chart.scrollIntoView({block: "center"});
          neared = true;
        }
        if (Date.now() - started < 60000) setTimeout(tick, 150);  // a busy machine may draw slowly
        return;
      }
      chart.classList.add("lesson-target");
      chart.scrollIntoView({block: "center"});
      const outlinedAt = performance.now();
      for (const wait of [400, 1200]) setTimeout(() => {
        if (chart.classList.contains("lesson-target") && movedAt < outlinedAt) chart.scrollIntoView({block: "center"});
      }, wait);
    };
    tick();
  };
  function clearFocus() {
    document.querySelectorAll(".lesson-target").forEach((e) => e.classList.remove("lesson-target"));
  }
  window.speclabClearFocus = clearFocus;
  window.speclabProjector = (on) => {
    document.body.classList.toggle("projector", !!on);
    return on;
  };
})();
</script>
"""

@contextmanager
def folded(chart: str) -> Iterator[None]:
    """What is built inside (inside a gr.Blocks): the rest of the panel of the chart with elem_id `chart`, its table
    and secondary charts. Shown as built on the page; in projector mode folded away behind a button of its own, so a
    room scrolls from one panel's chart to the next, and unfolded when a lesson point shows `chart` (speclabFocus).
    The page's head needs fold_style of every folded chart."""
    gr.HTML(f'<button type="button" class="more-toggle chip" data-more="{chart}">Show / hide this panel\'s table '
            'and other charts</button>')
    with gr.Column(elem_id=f"{chart}-more"):
        yield


def fold_style(charts) -> str:
    """The page's head rules folding `charts`' panels (folded) in projector mode until their button opens them."""
    rules = " ".join(f"body.projector:not(.more-{c}) #{c}-more {{ display: none !important; }}" for c in charts)
    return f"<style>{rules}</style>"


# Given to the page as it is (gr.Blocks' head), not through Gradio's css=, which copies every rule under its own
# container's selectors: a copy of "#show-drafts-toggle { display: none }" would then outrank the projector's rule.
HEAD = f"<style>{CSS}</style>{SCRIPT}"

# The toggle's own value, and on page load the link's ?projector=1, become the page's class.
TOGGLE_JS = "(on) => window.speclabProjector(on)"
FROM_LINK_JS = f"() => new URLSearchParams(window.location.search).get('{PARAMETER}') === '1'"


def layout() -> gr.Checkbox:
    """The toggle, and in projector mode a button that unfolds the drafts; returns the toggle."""
    with gr.Row(equal_height=True):
        toggle = gr.Checkbox(False, label="Projector mode: large type, two lanes a row, drafts folded away; "
                                          "click any token or number to pin its details", elem_id="projector",
                             container=False, scale=4)
        gr.HTML('<button type="button" id="show-drafts-toggle" class="chip">'
                'Show / hide rejected and cut drafts</button>')
    return toggle


@dataclass(frozen=True)
class ChartRedraw:
    """The server's half of the toggle: the session's mode, and its charts drawn again. `sessions`: the app's
    SessionStore; `redraw(session, step, token)`: the new value of every chart in `outputs`, given the step and the
    token the Step-through tab shows (the toggle's other two inputs)."""

    sessions: object
    redraw: Callable[..., tuple]

    def on_toggle(self, on, step, token, request: gr.Request):
        self.sessions.get(request.session_hash).projector = on is True
        return self.redraw(request.session_hash, step, token)


def adopt_from_link(sessions, request: gr.Request | None) -> None:
    """A link's ?projector=1 puts the session in projector mode before anything opens from it is drawn. The page's
    toggle tells the server too (ChartRedraw.on_toggle), but as a separate event that may be answered before or after
    the link's own: a chart the link opens drawn for the page could then replace the toggle's redraw."""
    params = getattr(request, "query_params", None) if request is not None else None
    if params is not None and dict(params).get(PARAMETER) == "1":
        sessions.get(request.session_hash).projector = True


# With the server's half: the Step-through tab's step and token travel with the toggle's value.
TOGGLE_WITH_STEP_JS = "(on, step, token) => [window.speclabProjector(on), step, token]"


def wire(toggle: gr.Checkbox, demo: gr.Blocks, charts: ChartRedraw | None = None, outputs=(), step_inputs=()) -> None:
    """step_inputs: the Step-through tab's slider and token selector (with `charts`)."""
    if charts is None:
        toggle.change(None, inputs=[toggle], outputs=None, js=TOGGLE_JS, queue=False)
    else:
        toggle.change(charts.on_toggle, inputs=[toggle, *step_inputs], outputs=list(outputs),
                      js=TOGGLE_WITH_STEP_JS, queue=False, preprocess=False, api_visibility="private",
                      show_progress="hidden")
    demo.load(None, inputs=None, outputs=[toggle], js=FROM_LINK_JS, queue=False)
