"""A real browser (Debian chromium through playwright) opens the app, clicks Run, and checks that every
lane fills, the timeline renders, the lanes' tokens read as the engine's text, and the console is clean.

Set SPECLAB_SCREENSHOT=path.png to keep a screenshot of the finished page (the README's is made so)."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("gradio")
playwright_api = pytest.importorskip("playwright.sync_api")

from app.main import build_app  # noqa: E402
from app.render import display_text  # noqa: E402
from engine.types import GenerationConfig  # noqa: E402

from conftest import launch_locally  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]


@pytest.fixture(scope="module")
def app_url(embedded_engine):
    demo = build_app(embedded_engine)
    yield launch_locally(demo)
    demo.close()


def test_run_in_chromium_fills_every_lane_and_the_timeline(app_url, embedded_engine, tmp_path):
    max_new_tokens = 64
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1300})
        console_errors = []
        page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: console_errors.append(str(exc)))
        page.goto(app_url, wait_until="networkidle")
        prompt = page.locator("#prompt textarea").input_value()
        page.click("#run")
        page.wait_for_selector("#status :text('done')", timeout=120_000)
        methods = embedded_engine.methods()
        for method in methods:
            lane = page.locator(f"#lane-{method} .lane-card")
            assert lane.get_attribute("data-state") == "done"
            shown = "".join(lane.locator(".tokens .tok[data-out]").all_text_contents())
            config = GenerationConfig(method=method, max_new_tokens=max_new_tokens)
            assert shown == display_text(embedded_engine.generate(prompt, config).text)
        assert page.locator("#lane-ar .tok.accepted").count() > 0
        assert page.locator("#timeline .plot-container").count() == 1
        assert page.locator("#timeline .bars path").count() > 0  # plotly drew the spans
        shot = os.environ.get("SPECLAB_SCREENSHOT") or str(tmp_path / "app.png")
        page.screenshot(path=shot, full_page=True)
        page.get_by_role("tab", name="About").click()
        page.wait_for_selector("text=Model card: the embedded SpecLab models", timeout=10_000)
        assert page.locator("text=held-out loss").count() > 0
        browser.close()
    assert not console_errors, console_errors
