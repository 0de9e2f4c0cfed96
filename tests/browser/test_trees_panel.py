"""Lesson points 8 and 10 in chromium at 1024×768: its link opens the Why tab on the recorded budget sweep, outlined, and the
panel's three charts (τ and speedup by budget, what a node and a draft forward cost, the published figures) draw with
every text whole and apart, in the page and in projector mode (text ≥ 18 px)."""

from __future__ import annotations

import pytest

pytest.importorskip("gradio")
pytest.importorskip("playwright.sync_api")

from app.lesson import POINTS  # noqa: E402

from conftest import CHART_TEXT_JS, chart_text_problems, needs_chromium, page_on  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]
SCREEN = {"width": 1024, "height": 768}
CHARTS = ("#why-trees-plot", "#why-trees-cost", "#why-trees-published")
POINT = next(p for p in POINTS if p.recording == "trees")


def chart_problems(page, selector: str, min_size: float = 0) -> list[str]:
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
    page.wait_for_function(
        """(sel) => { const texts = [...document.querySelectorAll(`${sel} .main-svg text`)].filter(t => {
                          const r = t.getBoundingClientRect();  // the texts CHART_TEXT_JS reads: shown ones
                          return t.textContent.trim() && r.width > 0 && r.height > 0; });
                      return texts.length > 0 && texts.every(t => parseFloat(getComputedStyle(t).fontSize) >= 18); }""",
        arg=selector, timeout=60_000)


def test_the_trees_point_opens_its_charts_whole_and_apart(random_app, chromium):
    url = random_app
    with page_on(chromium, viewport=SCREEN) as page:
        page.goto(f"{url}?lesson={POINT.number}")
        page.wait_for_selector(f"#{POINT.chart}.lesson-target", timeout=60_000)
        assert page.locator("#why-trees-table").inner_text().startswith("Recorded ")
        for selector in CHARTS:
            assert chart_problems(page, selector) == [], selector
        for_the_room(page)
        for selector in CHARTS:
            redrawn_for_the_room(page, selector)
        for selector in CHARTS:
            assert chart_problems(page, selector, min_size=18) == [], selector


LOAD = next(p for p in POINTS if p.recording == "load")


def test_the_load_point_opens_its_chart_whole_and_apart(random_app, chromium):
    """Lesson point 10: its link opens the Why tab's load panel, outlined, its chart's texts whole and apart, in the
    page and for the room; and the Compare tab's requests-at-once control, set by a link, runs each lane among
    others."""
    with page_on(chromium, viewport=SCREEN) as page:
        page.goto(f"{random_app}?lesson={LOAD.number}")
        page.wait_for_selector(f"#{LOAD.chart}.lesson-target", timeout=60_000)
        assert page.locator("#why-load-table").inner_text().startswith("Recorded ")
        assert chart_problems(page, "#why-load-plot") == []
        for_the_room(page)
        redrawn_for_the_room(page, "#why-load-plot")
        assert chart_problems(page, "#why-load-plot", min_size=18) == []
        # the table for the room: the lane names keep a column of their own beside the wider figures
        assert page.locator("#why-load-table th").first.bounding_box()["width"] > 100
        # the Compare control: a link's requests at once set the slider, and each lane says what its batch wrote
        page.goto(f"{random_app}?methods=baseline,dflash&max_new_tokens=8&requests_at_once=4")
        page.wait_for_selector("#status :text('among 4 requests at once')", timeout=60_000)
        assert page.locator("#requests-at-once input[type=number]").input_value() == "4"
        for method in ("baseline", "dflash"):
            chips = page.locator(f".lane-card[data-method='{method}'] .chips").inner_text()
            assert "batch tokens/s" in chips, chips
