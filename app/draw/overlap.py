"""The ceiling 1 − TV by hand: two distributions over a few tokens that a lecturer drags.

p is the target's distribution, q the drafter's. A draft x drawn from q passes with probability min(1, p(x) / q(x));
on average that is the overlap Σ_x min(p(x), q(x)) = 1 − TV(p, q). After a rejection the target draws its own
token from the residual max(p − q, 0), normalised. The widget draws all three from the bars as they stand: each
bar's shared part min(p, q) in green (what passes), q's excess over p in vermillion (drafted more often than the
target wants: rejected), p's excess over q in blue (what the target writes itself after a rejection).

It is one gr.HTML component with its own script (Gradio's `js_on_load`, run once per copy of the component with
`element` its root), so the Lesson tab and the slide each carry one and drag it without a server round trip.
Its style is the page's (HEAD, in the page's head: app/main.py): larger in projector mode and on a slide.
"""

from __future__ import annotations

import html
import json

import gradio as gr

from .theme import ACCEPTED, BONUS, DRAFT_WORK, REJECTED

# The example it opens with: five tokens, the target sure of the first, the drafter of the second.
TOKENS = (" the", " a", " this", " one", " my")
P_TARGET = (0.45, 0.25, 0.15, 0.10, 0.05)
Q_DRAFT = (0.25, 0.40, 0.05, 0.10, 0.20)
assert abs(sum(P_TARGET) - 1) < 1e-9 and abs(sum(Q_DRAFT) - 1) < 1e-9 and len(TOKENS) == len(P_TARGET) == len(Q_DRAFT)

STYLE = f"""
.pq-widget {{ font-family: ui-sans-serif, system-ui, sans-serif; font-size: 16px; line-height: 1.3; color: #222;
              --pq-bar-h: 150px; }}
body.projector .pq-widget {{ font-size: 22px; }}
#slides .pq-widget {{ font-size: 20px; --pq-bar-h: 70px; }}
.pq-head {{ margin-bottom: .4em; }}
.pq-head b {{ font-size: 1.3em; font-variant-numeric: tabular-nums; color: {ACCEPTED}; }}
.pq-grid {{ display: grid; column-gap: .3em; row-gap: .15em; align-items: end; }}
.pq-label {{ color: #555; white-space: nowrap; padding-right: .3em; }}
.pq-col {{ display: flex; justify-content: center; gap: .2em; }}
.pq-bar {{ position: relative; width: 1.2em; height: var(--pq-bar-h); background: #f2f2f2; border-radius: .2em;
           cursor: ns-resize; touch-action: none; user-select: none; }}
.pq-bar:focus-visible {{ outline: 3px solid {BONUS}; outline-offset: 2px; }}
.pq-fill {{ position: absolute; left: 0; right: 0; }}
.pq-shared {{ background: {ACCEPTED}; }}
.pq-resample {{ background: {BONUS}; }}
.pq-rejected {{ background: repeating-linear-gradient(45deg, {REJECTED}, {REJECTED} 4px, {REJECTED}aa 4px, {REJECTED}aa 8px); }}
.pq-top {{ position: absolute; left: -.2em; right: -.2em; height: 4px; margin-bottom: -2px; background: #222;
           border-radius: 2px; }}
.pq-letter {{ position: absolute; top: 100%; left: 0; right: 0; text-align: center; font-style: italic; }}
.pq-bar.pq-q .pq-top {{ background: {DRAFT_WORK}; }}
.pq-token {{ text-align: center; font-family: ui-monospace, monospace; white-space: pre; padding-top: 1.1em; }}
.pq-num {{ text-align: center; font-variant-numeric: tabular-nums; }}
.pq-pair {{ display: flex; justify-content: center; gap: .3em; font-size: .9em; }}
.pq-sub {{ font-size: .9em; color: #444; }}
.pq-ratio b {{ color: {ACCEPTED}; }}
.pq-resid {{ display: flex; flex-direction: column; align-items: center; }}
.pq-resid-track {{ position: relative; width: 1.5em; height: 2.4em; background: #f2f2f2; border-radius: .2em; }}
.pq-resid-bar {{ position: absolute; bottom: 0; left: 0; right: 0; background: {BONUS}; }}
.pq-key {{ margin-top: .3em; color: #444; font-size: .9em; }}
.pq-key span {{ display: inline-block; width: .8em; height: .8em; margin: 0 .2em 0 .6em; vertical-align: -.05em; }}
"""
HEAD = f"<style>{STYLE}</style>"

# Runs once per copy of the widget (gr.HTML's js_on_load; `element` is the component's root). It reads the example
# from the widget's data attributes, builds the bars and tables, and redraws them from p and q after every change.
SCRIPT = r"""
const root = element.querySelector(".pq-widget");
const tokens = JSON.parse(root.dataset.tokens);
const dist = {p: JSON.parse(root.dataset.p), q: JSON.parse(root.dataset.q)};
const n = tokens.length;
const fmt = (x) => x.toFixed(2);
const short = (x) => fmt(x).replace(/^0/, "");  // ".45": two to a column
const cells = (make) => tokens.map((token, i) => make(token, i)).join("");
const bar = (name, i) => `<div class="pq-bar pq-${name}" data-dist="${name}" data-i="${i}" tabindex="0"
    role="slider" aria-valuemin="0" aria-valuemax="1" aria-label="${name}(${JSON.stringify(tokens[i])})">
    <div class="pq-fill pq-shared"></div><div class="pq-fill ${name === "p" ? "pq-resample" : "pq-rejected"}"></div>
    <div class="pq-top"></div><span class="pq-letter">${name}</span></div>`;
const escape = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;");
root.innerHTML = `
  <div class="pq-head">1 − TV = Σ min(p, q) = <b class="pq-overlap"></b><br><span class="pq-sub">how often a draft from q passes, on
    average; rejected: TV = <span class="pq-tv"></span></span></div>
  <div class="pq-grid" style="grid-template-columns: auto repeat(${n}, minmax(0, 1fr))">
    <div class="pq-label">drag a bar</div>${cells((t, i) => `<div class="pq-col">${bar("p", i)}${bar("q", i)}</div>`)}
    <div class="pq-label">token</div>${cells((t) => `<div class="pq-token">${escape(t)}</div>`)}
    <div class="pq-label">p, q</div>${cells((t, i) => `<div class="pq-pair">
      <span class="pq-num" data-row="p" data-i="${i}"></span><span class="pq-num" data-row="q" data-i="${i}"></span></div>`)}
    <div class="pq-label">min(1, p/q)</div>${cells((t, i) =>
      `<div class="pq-num pq-ratio" data-row="ratio" data-i="${i}"></div>`)}
    <div class="pq-label">resample<br>(p − q)⁺/TV</div>${cells((t, i) => `<div class="pq-resid">
      <div class="pq-resid-track"><div class="pq-resid-bar" data-i="${i}"></div></div>
      <div class="pq-num" data-row="residual" data-i="${i}"></div></div>`)}
  </div>
  <div class="pq-key"><span style="background: var(--pq-shared)"></span>passes
    <span style="background: var(--pq-rejected)"></span>rejected
    <span style="background: var(--pq-resample)"></span>the target resamples it</div>`;

// bar i of p or q to `value`; the others keep their proportions and make the total 1 again
function set(name, i, value) {
  const d = dist[name];
  value = Math.min(1, Math.max(0, value));
  const rest = d.reduce((sum, x, j) => (j === i ? sum : sum + x), 0);
  d.forEach((x, j) => {
    if (j !== i) d[j] = rest > 0 ? (x * (1 - value)) / rest : (1 - value) / (n - 1);
  });
  d[i] = value;
}

function draw() {
  const {p, q} = dist;
  const shared = p.map((x, i) => Math.min(x, q[i]));
  const overlap = shared.reduce((a, b) => a + b, 0);
  const residual = p.map((x, i) => Math.max(x - q[i], 0));
  const tv = residual.reduce((a, b) => a + b, 0);  // Σ (p − q)⁺ = TV(p, q)
  root.querySelector(".pq-overlap").textContent = fmt(overlap);
  root.querySelector(".pq-tv").textContent = fmt(tv);
  root.dataset.overlap = overlap;
  for (let i = 0; i < n; i++) {
    for (const name of ["p", "q"]) {
      const value = dist[name][i], el = root.querySelector(`.pq-bar[data-dist="${name}"][data-i="${i}"]`);
      el.querySelector(".pq-shared").style.cssText = `bottom: 0; height: ${shared[i] * 100}%`;
      el.querySelector(".pq-fill:not(.pq-shared)").style.cssText =
        `bottom: ${shared[i] * 100}%; height: ${(value - shared[i]) * 100}%`;
      el.querySelector(".pq-top").style.bottom = `${value * 100}%`;
      el.setAttribute("aria-valuenow", fmt(value));
      root.querySelector(`[data-row="${name}"][data-i="${i}"]`).textContent = short(value);
    }
    // a token q never drafts is never judged: no ratio
    root.querySelector(`[data-row="ratio"][data-i="${i}"]`).innerHTML =
      q[i] > 0 ? `<b>${fmt(Math.min(1, p[i] / q[i]))}</b>` : "never drafted";
    const share = tv > 0 ? residual[i] / tv : 0;
    root.querySelector(`.pq-resid-bar[data-i="${i}"]`).style.height = `${share * 100}%`;
    root.querySelector(`[data-row="residual"][data-i="${i}"]`).textContent = tv > 0 ? fmt(share) : "—";
  }
}

// Drag a bar's top with a mouse, a pen or a finger (pointer events); a focused bar also moves with ↑ and ↓.
function valueAt(el, event) {
  const box = el.getBoundingClientRect();
  return (box.bottom - event.clientY) / box.height;
}
root.addEventListener("pointerdown", (event) => {
  const el = event.target.closest(".pq-bar");
  if (!el) return;
  event.preventDefault();
  el.setPointerCapture(event.pointerId);
  const move = (e) => { set(el.dataset.dist, Number(el.dataset.i), valueAt(el, e)); draw(); };
  move(event);
  el.addEventListener("pointermove", move);
  el.addEventListener("pointerup", () => el.removeEventListener("pointermove", move), {once: true});
});
root.addEventListener("keydown", (event) => {
  const el = event.target.closest(".pq-bar");
  const step = {ArrowUp: 0.05, ArrowDown: -0.05}[event.key];
  if (!el || !step) return;
  event.preventDefault();
  const name = el.dataset.dist, i = Number(el.dataset.i);
  set(name, i, dist[name][i] + step);
  draw();
});
draw();
"""


def widget_html() -> str:
    """The widget's root, carrying its example; the script draws the rest."""
    data = {"tokens": TOKENS, "p": P_TARGET, "q": Q_DRAFT}
    attributes = " ".join(f'data-{name}="{html.escape(json.dumps(value))}"' for name, value in data.items())
    colours = f"--pq-shared: {ACCEPTED}; --pq-rejected: {REJECTED}; --pq-resample: {BONUS}"
    return f'<div class="pq-widget" {attributes} style="{colours}"></div>'


def widget(elem_id: str) -> gr.HTML:
    """One copy of the widget (inside a gr.Blocks)."""
    return gr.HTML(widget_html(), js_on_load=SCRIPT, elem_id=elem_id, elem_classes="pq")
