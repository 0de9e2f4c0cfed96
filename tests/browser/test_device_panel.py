"""The device recordings beside the lesson's trees and load points, in chromium at 1024×768: point 8's link opens
the Why tab, where under the live panels the device's recording names its device and date, says it is a recording,
and fits the page's width, in the page and in projector mode; the Compare tab shows the default comparison's."""

from __future__ import annotations

import pytest

pytest.importorskip("gradio")
pytest.importorskip("playwright.sync_api")

from app.lesson import POINTS  # noqa: E402
from app.tabs.device_recordings import device_recordings  # noqa: E402

from conftest import needs_chromium, page_on  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]
SCREEN = {"width": 1024, "height": 768}
TREES = next(p for p in POINTS if p.recording == "trees")
FITS_JS = """(el) => { const r = el.getBoundingClientRect();
  const tables = [...el.querySelectorAll('table')].map(t => t.getBoundingClientRect());
  return {left: r.left, right: r.right, visible: r.width > 0 && r.height > 0,
          widest: Math.max(r.right, ...tables.map(t => t.right)),
          font: parseFloat(getComputedStyle(el.querySelector('p') || el).fontSize)}; }"""


def test_the_device_recording_sits_beside_the_trees_and_load_panels(random_app, chromium):
    recordings = device_recordings()
    with page_on(chromium, viewport=SCREEN) as page:
        page.goto(f"{random_app}?lesson={TREES.number}")
        page.wait_for_selector(f"#{TREES.chart}.lesson-target", timeout=60_000)
        fonts = {}
        for room in (False, True):
            if room:
                page.click("#projector input")
                page.wait_for_selector("body.projector", timeout=30_000)
            for kind in ("trees", "load"):
                panel = page.locator(f"#device-{kind}")
                panel.scroll_into_view_if_needed()
                text = panel.inner_text()
                recording = recordings[kind]
                assert text.startswith(f"Recorded on {recording.device_words} on {recording.recorded_at[:10]}")
                assert "not a live run" in text and "measured live" not in text
                box = panel.evaluate(FITS_JS)
                assert box["visible"] and box["left"] >= 0 and box["widest"] <= SCREEN["width"], (kind, room, box)
                fonts[(kind, room)] = box["font"]
        assert fonts[("trees", True)] >= fonts[("trees", False)]  # the room's view is no smaller
        page.get_by_role("tab", name="Compare").click()  # the default comparison, beside the live run's lanes
        panel = page.locator("#device-comparison")
        panel.scroll_into_view_if_needed()
        recording = recordings["comparison"]
        assert panel.inner_text().startswith(f"Recorded on {recording.device_words} on {recording.recorded_at[:10]}")
        box = panel.evaluate(FITS_JS)
        assert box["visible"] and box["left"] >= 0 and box["widest"] <= SCREEN["width"], box
