"""Lesson points 8 and 10 in chromium at 1024×768: point 8's link opens the Why tab on the recorded budget sweep,
outlined, and the panel's three charts (τ and speedup by budget, what a node and a draft forward cost, the published
figures) and the load panel's (point 10's) draw with every text whole and apart, in the page and in projector mode
(text ≥ 18 px). Beside the trees and load panels, the device's recording names its device and date, says it is a
recording, and fits the page's width, in the page and in projector mode (where the load panel's is folded until its
button is pressed); the Compare tab shows the default comparison's. A link's requests at once run each lane among
others."""

from __future__ import annotations

import pytest

pytest.importorskip("gradio")
pytest.importorskip("playwright.sync_api")

from app.lesson import POINTS  # noqa: E402
from app.tabs.device_recordings import device_recordings  # noqa: E402

from conftest import (CHART_TEXT_JS, OUTLINED_FOR_JS, POLL_MS, SETTLED_MS, chart_text_problems,  # noqa: E402
                      needs_chromium, page_on)

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]
SCREEN = {"width": 1024, "height": 768}
CHARTS = ("#why-trees-plot", "#why-trees-cost", "#why-trees-published")
POINT = next(p for p in POINTS if p.recording == "trees")
LOAD_CHART = "#" + next(p for p in POINTS if p.recording == "load").chart
FITS_JS = """(el) => { const r = el.getBoundingClientRect();
  const tables = [...el.querySelectorAll('table')].map(t => t.getBoundingClientRect());
  return {left: r.left, right: r.right, visible: r.width > 0 && r.height > 0,
          widest: Math.max(r.right, ...tables.map(t => t.right)),
          font: parseFloat(getComputedStyle(el.querySelector('p') || el).fontSize)}; }"""


def chart_problems(page, selector: str, min_size: float = 0) -> list[str]:
    page.locator(selector).scroll_into_view_if_needed()  # the page draws a chart once it is near the screen
    page.wait_for_selector(f"{selector} .main-svg", timeout=30_000)
    chart = page.locator(f"{selector} .js-plotly-plot").evaluate(CHART_TEXT_JS)
    assert chart["texts"], selector
    return chart_text_problems(chart, min_size=min_size)


def for_the_room(page) -> None:
    """Projector mode from the page's own toggle, on the page already open: a page load costs seconds (a link's
    ?projector=1 opens the room's view in tests/browser/test_browser.py)."""
    page.click("#projector input")
    page.wait_for_selector("body.projector", timeout=30_000)


def redrawn_for_the_room(page, selector: str) -> None:
    """Wait until projector mode has redrawn the chart: every text in it at least 18 px (the panels are redrawn one
    after another, later on a busy machine: as patient as the lesson's own waits)."""
    page.locator(selector).scroll_into_view_if_needed()  # the page draws a chart once it is near the screen
    page.wait_for_function(
        """(sel) => { const texts = [...document.querySelectorAll(`${sel} .main-svg text`)].filter(t => {
                          const r = t.getBoundingClientRect();  // the texts CHART_TEXT_JS reads: shown ones
                          return t.textContent.trim() && r.width > 0 && r.height > 0; });
                      return texts.length > 0 && texts.every(t => parseFloat(getComputedStyle(t).fontSize) >= 18); }""",
        arg=selector, timeout=60_000, polling=POLL_MS)


def device_recording_fits(page, kind: str, recording, where: str) -> float:
    """The device's recording beside the `kind` panel: named, dated, said to be a recording, within the screen's
    width; its text size."""
    panel = page.locator(f"#device-{kind}")
    panel.scroll_into_view_if_needed()
    text = panel.inner_text()
    assert text.startswith(f"Recorded on {recording.device_words} on {recording.recorded_at[:10]}"), (kind, where)
    assert "not a live run" in text and "measured live" not in text, (kind, where)
    box = panel.evaluate(FITS_JS)
    assert box["visible"] and box["left"] >= 0 and box["widest"] <= SCREEN["width"], (kind, where, box)
    return box["font"]


def test_the_trees_point_opens_its_charts_whole_and_apart_beside_the_load_panel_and_the_devices_recordings(
        random_app, chromium):
    """Lesson point 8's link opens the Why tab on the trees panel, outlined; on that page (a load and a switch to
    projector mode cost seconds each) the trees panel's three charts and the load panel's chart (lesson point 10's)
    are whole and apart, and the device recordings beside both panels read and fit, in the page and for the room;
    then the Compare tab's device recording. That every point's chart is on its point's tab, and that a link to a
    point on the Why tab shows its note, is tested in tests/app/test_lesson.py."""
    recordings = device_recordings()
    with page_on(chromium, viewport=SCREEN) as page:
        page.goto(f"{random_app}?lesson={POINT.number}")
        page.wait_for_function(OUTLINED_FOR_JS, arg=[POINT.chart, SETTLED_MS], timeout=60_000,
                               polling=POLL_MS)  # outlined, its late scrolls past: none moves a control under a click
        assert page.locator("#why-trees-table").inner_text().startswith("Recorded ")
        assert page.locator("#why-load-table").inner_text().startswith("Recorded ")
        for selector in (*CHARTS, LOAD_CHART):
            assert chart_problems(page, selector) == [], selector
        fonts = {kind: device_recording_fits(page, kind, recordings[kind], "page") for kind in ("trees", "load")}
        for_the_room(page)
        for selector in (*CHARTS, LOAD_CHART):
            redrawn_for_the_room(page, selector)
        for selector in (*CHARTS, LOAD_CHART):
            assert chart_problems(page, selector, min_size=18) == [], selector
        # the point opened its own panel whole; the load panel's table and recording folded until asked for
        room_font = device_recording_fits(page, "trees", recordings["trees"], "projector mode")
        assert room_font >= fonts["trees"]  # the room's view is no smaller
        assert not page.locator("#device-load").is_visible() and not page.locator("#why-load-table").is_visible()
        page.click('.more-toggle[data-more="why-load-plot"]')
        device_recording_fits(page, "load", recordings["load"], "projector mode, unfolded")
        # the load table for the room: the lane names keep a column of their own beside the wider figures
        assert page.locator("#why-load-table th").first.bounding_box()["width"] > 100
        page.get_by_role("tab", name="Compare").click()  # the default comparison, beside the live run's lanes
        panel = page.locator("#device-comparison")
        panel.scroll_into_view_if_needed()
        recording = recordings["comparison"]
        assert panel.inner_text().startswith(f"Recorded on {recording.device_words} on {recording.recorded_at[:10]}")
        box = panel.evaluate(FITS_JS)
        assert box["visible"] and box["left"] >= 0 and box["widest"] <= SCREEN["width"], box


def test_a_links_requests_at_once_run_each_lane_among_others(random_app, chromium):
    """The Compare tab's requests-at-once control, set by a link, sets the slider, and each lane says what its
    batch wrote."""
    with page_on(chromium, viewport=SCREEN) as page:
        page.goto(f"{random_app}?methods=baseline,dflash&max_new_tokens=8&requests_at_once=4")
        page.wait_for_selector("#status :text('among 4 requests at once')", timeout=60_000)
        assert page.locator("#requests-at-once input[type=number]").input_value() == "4"
        for method in ("baseline", "dflash"):
            chips = page.locator(f".lane-card[data-method='{method}'] .chips").inner_text()
            assert "batch tokens/s" in chips, chips
