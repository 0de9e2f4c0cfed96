"""The lesson as slides, in chromium at 1024×768: each point's slide fits one screen, its claim on one line, its chart
taking the rest of the screen with every text whole, apart and at least 18 px; the arrow keys and a clicker's
Page Down / Page Up walk every slide in order and back, and `?lesson=N&present=1` opens slide N. The p/q widget on
point 3's slide: dragging a bar shows the 1 − TV, min(1, p/q) and residual of the new p and q."""

from __future__ import annotations

import pytest

pytest.importorskip("gradio")
pytest.importorskip("playwright.sync_api")

from app.draw import overlap  # noqa: E402
from app.lesson import POINTS  # noqa: E402
from app.tabs.slides import WIDGET_POINT  # noqa: E402

from conftest import (CHART_TEXT_JS, POLL_MS, chart_text_problems, needs_chromium, no_near_chart_waits,  # noqa: E402
                      page_on)
from scripts.support import CHARTS_DRAWN_FOR_JS, draw_shown_charts  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]
SCREEN = {"width": 1024, "height": 768}
CHART_HEIGHT = 450  # px of a slide's chart, at least, at 1024×768


@pytest.fixture(scope="module")
def page(random_app, chromium):
    """One 1024×768 page for the module, on the app served for the browser tests (`random_app`: the slides draw the
    lesson's recordings, not the engine); each test opens its own link in it."""
    with page_on(chromium, viewport=SCREEN) as page:
        yield page


def shown(page, number: int) -> None:
    """Wait for slide `number` with its chart drawn and the address naming it."""
    page.wait_for_function("""(n) => document.querySelector(`#slides .slide-claim[data-point="${n}"]`)
                                     && document.querySelector('#slide-chart .main-svg')
                                     && location.search.includes(`lesson=${n}&present=1`)""", arg=number,
                           timeout=30_000, polling=POLL_MS)


# What a slide's checks read, in one call: the page's height, whether the p/q widget shows, the takeaway, the chart's
# text (CHART_TEXT_JS), whether the claim fits its line, and the claim's and takeaway's sizes
SLIDE_JS = """() => {
  const chartText = %s;
  const size = (el) => parseFloat(getComputedStyle(el).fontSize), box = (el) => el && el.getBoundingClientRect();
  const widget = document.querySelector('#slide-widget .pq-widget'), claim = document.querySelector('#slides .slide-claim h2');
  const takeaway = document.querySelector('#slides .slide-takeaway');
  return {height: document.documentElement.scrollHeight,
          widget: !!widget && box(widget).width > 0 && box(widget).height > 0 && getComputedStyle(widget).visibility === 'visible',
          takeaway: takeaway.innerText, chart: chartText(document.querySelector('#slide-chart .js-plotly-plot')),
          claim_fits: claim.scrollWidth <= claim.clientWidth, claim_size: size(claim), takeaway_size: size(takeaway)};
}""" % CHART_TEXT_JS


def whole_on_the_screen(page, number: int) -> None:
    """Slide `number` fits the screen, shows the p/q widget only on its point, its takeaway says what it shows here;
    its chart fills the room its text leaves, every text in it whole, apart and at least 18 px; its claim on one
    line, claim and takeaway at least 18 px."""
    page.wait_for_function(  # plotly has refitted the chart to the room the slide's text left it
        """() => { const svg = document.querySelector('#slide-chart .main-svg'),
                         box = document.querySelector('#slide-chart').getBoundingClientRect();
                   return Math.abs(svg.getBoundingClientRect().height - box.height) < 4; }""",
        timeout=10_000, polling=POLL_MS)
    slide = page.evaluate(SLIDE_JS)
    assert slide["height"] <= SCREEN["height"], f"slide {number} is {slide['height']} px tall"
    assert slide["widget"] == (number == WIDGET_POINT), f"slide {number}: the p/q widget"
    assert slide["takeaway"].startswith("Here:"), f"slide {number}"
    chart = slide["chart"]
    assert chart["frame"]["height"] >= CHART_HEIGHT, f"slide {number}: the chart is {chart['frame']['height']} px"
    assert chart["texts"] and chart_text_problems(chart, min_size=18) == [], f"slide {number}"
    assert slide["claim_fits"], f"slide {number}: its claim is cut"
    assert slide["claim_size"] >= 18 and slide["takeaway_size"] >= 18, f"slide {number}"


def test_a_link_opens_its_slide_and_the_keys_walk_every_slide_whole_in_order_and_back(page, random_app):
    """One walk (a page load costs seconds): the link opens slide 2, the keys go to the first, then through every
    slide, each checked whole on the screen (slide 2 also run live, the p/q widget dragged on its slide, each once
    checked), and back by both keys. A key past the last slide moves nothing (and asks the server nothing, so the
    next key is not dropped while it is answered): had it moved, the first step back would not show the slide
    before the last. Each slide draws its chart (seconds of a browser's CPU): the walk back stops at two."""
    assert 2 < WIDGET_POINT < len(POINTS) - 2  # the widget's slide and slide 2 are passed on the way forward
    page.goto(f"{random_app}?lesson=2&present=1")
    shown(page, 2)
    assert not page.locator("#tabs, [role=tablist]").first.is_visible()  # the slide, not the page
    page.keyboard.press("ArrowLeft")
    shown(page, 1)
    for number in range(1, len(POINTS) + 1):
        shown(page, number)
        whole_on_the_screen(page, number)
        if number == 2:
            a_slides_live_status_reads_at_18_px(page)
        if number == WIDGET_POINT:  # checked whole first, then dragged
            dragging_a_bar_shows_the_overlap_ratios_and_residual_of_the_new_p_and_q(page)
        page.keyboard.press("ArrowRight" if number % 2 else "PageDown")
    shown(page, len(POINTS))  # the last slide stays the last (the next step back shows the one before it)
    for number, key in ((len(POINTS) - 1, "ArrowLeft"), (len(POINTS) - 2, "PageUp")):
        page.keyboard.press(key)
        shown(page, number)


def dragging_a_bar_shows_the_overlap_ratios_and_residual_of_the_new_p_and_q(page) -> None:
    """On the p/q widget's slide (shown, not dragged yet)."""
    widget = page.locator("#slide-widget .pq-widget")
    assert float(widget.locator(".pq-overlap").inner_text()) == pytest.approx(
        sum(map(min, overlap.P_TARGET, overlap.Q_DRAFT)), abs=0.005)
    dragged, to = 2, 0.8  # p of the third token up to 0.8 of its bar
    bar = widget.locator(f'.pq-bar[data-dist="p"][data-i="{dragged}"]')
    box = bar.bounding_box()
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + box["height"] - 2)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] * (1 - to / 2), steps=4)
    page.mouse.move(x, box["y"] + box["height"] * (1 - to), steps=4)
    page.mouse.up()
    # the expected distributions, computed here: the dragged p to `to`, the other p's scaled to fill the rest
    rest = sum(v for i, v in enumerate(overlap.P_TARGET) if i != dragged)
    p = [to if i == dragged else v * (1 - to) / rest for i, v in enumerate(overlap.P_TARGET)]
    q = overlap.Q_DRAFT
    expected = sum(min(a, b) for a, b in zip(p, q))
    assert abs(expected - sum(map(min, overlap.P_TARGET, q))) > 0.05  # the drag moves the overlap visibly
    assert float(widget.locator(".pq-overlap").inner_text()) == pytest.approx(expected, abs=0.011)
    ratios = widget.locator('[data-row="ratio"]').all_inner_texts()
    assert [float(r) for r in ratios] == pytest.approx([min(1, a / b) for a, b in zip(p, q)], abs=0.03)
    residual = [max(a - b, 0) for a, b in zip(p, q)]
    shares = [float(r) for r in widget.locator('[data-row="residual"]').all_inner_texts()]
    assert shares == pytest.approx([r / sum(residual) for r in residual], abs=0.011)
    drawn = widget.locator(".pq-resid-bar").evaluate_all("bars => bars.map(b => b.getBoundingClientRect().height)")
    assert [h > 0 for h in drawn] == [r > 0 for r in residual]  # the residual drawn where p is above q
    sizes = widget.evaluate("""w => [...w.querySelectorAll('*')].filter(e => [...e.childNodes].some(
        c => c.nodeType === 3 && c.textContent.trim())).map(e => parseFloat(getComputedStyle(e).fontSize))""")
    assert min(sizes) >= 18  # read from the back of the room


# Every text element of the page that is shown, with its computed size (charts' own text is read by CHART_TEXT_JS)
PAGE_TEXT_JS = """(min) => {
  const small = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest('svg, #slides') || el.offsetParent === null) continue;
    const box = el.getBoundingClientRect(), size = parseFloat(getComputedStyle(el).fontSize);
    if (box.width && box.height && size < min) small.push(`${node.textContent.trim().slice(0, 30)} at ${size} px`);
  }
  return small;
}"""


# Every chart shown on the page (visible as playwright counts it: a box, not hidden): its name and its text
SHOWN_CHARTS_JS = """() => {
  const chartText = %s;
  return [...document.querySelectorAll('.js-plotly-plot')].filter(p => { const r = p.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(p).visibility === 'visible'; })
    .map(p => ({name: p.closest('[id]') && p.closest('[id]').id, chart: chartText(p)}));
}""" % CHART_TEXT_JS


def readable(page, where: str, min_size: float) -> None:
    """Every text shown on the page at least `min_size` px, and every chart shown whole, apart and that large."""
    draw_shown_charts(page)
    assert page.evaluate(PAGE_TEXT_JS, min_size) == [], where
    for shown_chart in page.evaluate(SHOWN_CHARTS_JS):
        chart, name = shown_chart["chart"], shown_chart["name"]
        assert chart_text_problems(chart, min_size=min_size) == [], f"{where}: {name}"
        shrunk = [t["text"] for t in chart["texts"] if t["width"] >= t["height"] and t["height"] < 0.9 * min_size]
        assert shrunk == [], f"{where}: {name}"  # plotly shrinks a bar's label by a transform, not its font size


def projector(page, on: bool) -> None:
    """Switch projector mode with the page's own toggle, and wait for the charts drawn again for it."""
    page.locator("#projector input").set_checked(on)
    page.wait_for_function("(on) => document.body.classList.contains('projector') === on", arg=on, timeout=10_000,
                           polling=POLL_MS)
    charts_drawn_for(page, on)


def charts_drawn_for(page, room: bool) -> None:
    """Wait until every visible chart is drawn, its tick labels at projector mode's size (`room`) or the page's (a
    chart drawn for a room in either mode, `.drawn-for-a-room`, is not redrawn by the switch: only drawn)."""
    draw_shown_charts(page)
    page.wait_for_function(CHARTS_DRAWN_FOR_JS, arg=room, timeout=30_000, polling=POLL_MS)


# What each tab shows once it is open: read as soon as it is there, its charts drawn
TAB_SHOWN = {"Step through": '#step-blocks .st-lanes[data-step="1"]',
             "Why": "#why-load-plot :is(.main-svg, .chart-waiting)",  # a chart far down the tab waits to be drawn
             "Lesson": "#lesson-1", "About": "#glossary"}


def open_tab(page, name: str, room: bool) -> None:
    page.get_by_role("tab", name=name).click()
    page.wait_for_selector(TAB_SHOWN[name], state="visible", timeout=30_000)
    charts_drawn_for(page, room)


WHY_FOLDED_PX = 9_000  # the Why tab's height at most, at 1024×768 in projector mode with its panels folded


def chart_fills_its_box(page, selector: str) -> None:
    """Wait until the chart `selector` spans its box's width: one drawn while its tab was hidden is laid out at
    plotly's default 700 px, its texts crowded, until the page refits it."""
    page.locator(selector).scroll_into_view_if_needed()  # the page draws a chart once it is near the screen
    page.wait_for_function(
        """(sel) => { const box = document.querySelector(sel), svg = box && box.querySelector('.main-svg');
                      return svg && svg.getBoundingClientRect().width >= 0.9 * box.getBoundingClientRect().width; }""",
        arg=selector, timeout=10_000, polling=POLL_MS)


def why_folded_for_the_room(page) -> None:
    """The Why tab in projector mode: each panel's table and other charts folded, the tab within WHY_FOLDED_PX; the
    trees panel's button unfolds its charts, whole and at the room's size."""
    assert not page.locator("#why-trees-cost").is_visible() and not page.locator("#why-sweep-table").is_visible()
    folded = page.evaluate("document.documentElement.scrollHeight")
    assert folded <= WHY_FOLDED_PX, f"Why is {folded} px tall in projector mode"
    page.click('.more-toggle[data-more="why-trees-plot"]')
    for chart in ("#why-trees-cost", "#why-trees-published"):
        chart_fills_its_box(page, chart)
    readable(page, "Why, projector mode, the trees panel unfolded", 18)
    assert page.evaluate("document.documentElement.scrollHeight") > folded


def test_every_tab_reads_at_18_px_in_projector_mode_and_11_outside(page, random_app):
    """At 1024×768, every tab (Compare with a lesson comparison, its step through, Why, Lesson, About): in projector
    mode no text under 18 px, no chart text cut, overlapping or shrunk, Why's panels folded to their charts; outside
    it none under 11 px; after Run in projector mode, the lanes in the first screen (then the run is stopped). A chart
    far below the view waits undrawn until it comes near, and the checks bring each near (draw_shown_charts).
    Projector mode is switched on once (on Compare, Why drawn already: its charts redrawn while hidden must refit when
    it shows) and off once (on Step through): a switch redraws every chart (seconds)."""
    page.goto(f"{random_app}?lesson=1")
    page.wait_for_selector("#formula-vs-measured .main-svg", timeout=30_000)
    readable(page, "Compare", 11)
    # from the top of the Why tab, its last chart waits undrawn until it comes near; none near the view waits
    page.evaluate("() => scrollTo(0, 0)")
    page.get_by_role("tab", name="Why").click()
    page.wait_for_selector(TAB_SHOWN["Why"], state="visible", timeout=30_000)
    assert page.locator("#why-load-plot .chart-waiting").count() == 1
    no_near_chart_waits(page)
    assert page.locator("#why-load-plot .chart-waiting").count() == 1  # far down the tab, still waiting
    charts_drawn_for(page, room=False)
    assert page.locator("#why-load-plot .chart-waiting").count() == 0
    readable(page, "Why", 11)
    for tab in ("Lesson", "About"):
        open_tab(page, tab, room=False)
        readable(page, tab, 11)
    page.get_by_role("tab", name="Compare").click()
    draws = page.evaluate("window.speclabChartDraws")
    projector(page, True)
    page.wait_for_timeout(300)  # a second draw of a chart would follow its first at once
    drawn, charts = page.evaluate("[window.speclabChartDraws, document.querySelectorAll('.js-plotly-plot').length]")
    assert drawn - draws <= charts  # each chart drawn once for the room (Gradio's Plot alone draws each twice)
    readable(page, "Compare, projector mode", 18)
    page.get_by_role("tab", name="Step through").click()
    page.get_by_role("button", name="Show my last run").click()
    page.wait_for_selector(".st-tok", timeout=30_000)
    page.get_by_role("button", name="Next").click()
    page.wait_for_selector(TAB_SHOWN["Step through"], timeout=30_000)
    charts_drawn_for(page, True)
    readable(page, "Step through, projector mode", 18)
    for tab in ("Why", "Lesson", "About"):
        open_tab(page, tab, room=True)
        if tab == "Why":
            for chart in ("#why-prediction", "#why-sweep", "#why-check-plot", "#why-load-plot"):
                chart_fills_its_box(page, chart)
        readable(page, f"{tab}, projector mode", 18)
        if tab == "Why":
            why_folded_for_the_room(page)
    page.get_by_role("tab", name="Compare").click()
    page.locator("#run").click()  # a room watches the lanes: after Run they are in the first screen
    page.wait_for_function("""() => { const top = document.getElementById('compare-lanes').getBoundingClientRect().top;
                                      return top > -4 && top < innerHeight / 2; }""",
                           timeout=10_000, polling=POLL_MS)
    page.click("#stop")  # the rest of the run (seconds of CPU, drawn on Compare) is not what this test reads
    page.wait_for_function("() => /^(stopped|done) /.test(document.querySelector('#status').innerText.trim())",
                           timeout=10_000, polling=POLL_MS)
    open_tab(page, "Step through", room=True)
    projector(page, False)
    readable(page, "Step through", 11)


def a_slides_live_status_reads_at_18_px(page) -> None:
    """Run it live on a slide (shown): its status line says it measured live, at least 18 px, as the rest of the
    slide."""
    page.click("#slide-live")
    page.wait_for_function("() => /measured live|⚠/.test(document.querySelector('#slide-status')?.innerText || '')",
                           timeout=60_000, polling=POLL_MS)
    status = page.evaluate("""() => [...document.querySelectorAll('#slide-status *')].filter(el => el.innerText?.trim()
                                  && ![...el.children].some(c => c.innerText?.trim()))
                                  .map(el => [el.innerText.trim(), parseFloat(getComputedStyle(el).fontSize)])""")
    assert status and all(size >= 18 for _, size in status), status
    assert any("measured live" in text for text, _ in status), status
