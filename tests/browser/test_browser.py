"""A real browser (Debian chromium through playwright) opens the app, clicks Run, and checks that every
default lane fills, the timeline renders, the lanes' tokens read as the engine's text, and the console is
clean; and opens a share link, which restores the controls and runs only the lanes it names.

Set SPECLAB_SCREENSHOT=path.png to keep a screenshot of the finished page (the README's is made so)."""

from __future__ import annotations

import functools
import json
import os

import pytest

pytest.importorskip("gradio")
pytest.importorskip("playwright.sync_api")

from urllib.parse import parse_qs, urlsplit  # noqa: E402

import app.run.runner as runner  # noqa: E402
import app.tabs.step as step_tab  # noqa: E402
from app.settings import default_settings  # noqa: E402
from app.main import build_app  # noqa: E402
from app.draw.render import display_text  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402

from conftest import POLL_MS, launch_locally, needs_chromium, no_near_chart_waits, page_on  # noqa: E402
from scripts.support import draw_shown_charts  # noqa: E402
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]


class Opened:
    """What open_page opened: its context's permissions can be granted; close() closes the page (page_on)."""

    def __init__(self, opening, page):
        self._opening, self._context = opening, page.context

    def grant_permissions(self, *args, **kwargs):
        return self._context.grant_permissions(*args, **kwargs)

    def close(self) -> None:
        self._opening.__exit__(None, None, None)


def open_page(browser):
    """One wide page whose console errors (and uncaught page errors) are collected, and what closes it: a page of
    the test process's kept context (page_on: warm caches, so a load costs about half a fresh context's), whose
    cookies, storage and permissions are cleared when it closes, as a fresh context would start."""
    opening = page_on(browser, viewport={"width": 1500, "height": 1300})
    page = opening.__enter__()
    console_errors = []
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: console_errors.append(str(exc)))
    return Opened(opening, page), page, console_errors


# One read of the input at a selector, in the page: how many reads in a row (POLL_STILL_MS apart) have found its value
# since it last changed; once they span `quiet` ms, {value}; false until then
HELD_STILL_JS = """([selector, quiet, every]) => {
  const value = document.querySelector(selector).value, seen = window.__heldStill;
  if (!seen || seen.value !== value) { window.__heldStill = {value, still: 0}; return false; }
  seen.still += every;
  return seen.still >= quiet ? {value} : false;
}"""
POLL_STILL_MS = 50


def held_still(page, selector, quiet_ms, timeout_ms):
    """The value of the input at `selector` once it has not changed for quiet_ms; fails if it keeps changing for
    timeout_ms. Read in the page every POLL_STILL_MS, not by two round trips to the browser per read from here."""
    page.evaluate("() => { delete window.__heldStill; }")
    try:
        return page.wait_for_function(HELD_STILL_JS, arg=[selector, quiet_ms, POLL_STILL_MS],
                                      timeout=timeout_ms, polling=POLL_STILL_MS).json_value()["value"]
    except PlaywrightTimeout:
        last = page.evaluate("() => window.__heldStill && window.__heldStill.value")
        raise AssertionError(f"the value kept changing for {timeout_ms} ms (last {last!r})") from None


# Step through's Play ticks this often in these tests (0.6 s in the app): the test watches whole walks to the end
TICK_S = 0.2


@pytest.fixture(scope="module")
def app_url(embedded_engine):
    """The app on the shipped models, each lane timed once (the timing runs have tests of their own:
    tests/app/test_timing_runs.py, tests/app/test_provisional.py); what the page shows is the same."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(step_tab, "PLAY_EVERY_S", TICK_S)  # read when the tab is built
        demo = build_app(embedded_engine, run_lanes=functools.partial(runner.run_lanes, timing_runs=1))
    yield launch_locally(demo)
    demo.close()


def test_run_in_chromium_fills_every_lane_and_the_timeline_then_an_example_and_saved_files_open(
        app_url, chromium, embedded_engine):
    """Run fills every default lane with the baseline's text and draws the timeline; the About tab shows the model
    card. Then, on the same page (a load costs seconds), the example prompts and both Open buttons, the app's own
    handlers' (they answer an API client's bad values in one line), behave in the page as Gradio's own components
    did."""
    from app.examples import example_prompts
    from conftest import ASSETS

    # Every check holds at any length: 16 new tokens (a quarter of the page's 64) still give every drafter accepted
    # tokens, for a quarter of the engine's work; the README's screenshot shows the page's own length
    shot = os.environ.get("SPECLAB_SCREENSHOT")
    page_length = default_settings(embedded_engine.methods()).max_new_tokens
    max_new_tokens = page_length if shot else 16
    context, page, console_errors = open_page(chromium)
    try:
        page.goto(app_url, wait_until="networkidle")
        prompt = page.locator("#prompt textarea").input_value()
        length = page.locator("#max-new-tokens input[type=number]")
        assert length.input_value() == str(page_length)
        if not shot:
            length.fill(str(max_new_tokens))
            length.press("Tab")
        page.click("#run")
        page.wait_for_selector("#status :text('done')", timeout=120_000)
        # at temperature 0 every lane writes the target's own greedy text: each card shows the baseline's
        baseline = embedded_engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=max_new_tokens))
        for method in default_settings(embedded_engine.methods()).methods:
            lane = page.locator(f"#lane-{method} .lane-card")
            assert lane.get_attribute("data-state") == "done"
            assert "".join(lane.locator(".tokens .tok[data-out]").all_text_contents()) == display_text(baseline.text)
        assert page.locator("#lane-eagle3 .tok.accepted").count() > 0
        # a chart out of sight may wait to be drawn (tests/browser/test_slides.py), never one near the view; printing
        # draws every chart
        no_near_chart_waits(page)
        page.evaluate("() => dispatchEvent(new Event('beforeprint'))")
        assert page.locator(".chart-waiting").count() == 0
        page.locator("#timeline").scroll_into_view_if_needed()  # a value landing after done is drawn once near
        page.wait_for_selector("#timeline .bars path", state="attached", timeout=30_000)  # plotly drew the spans
        assert page.locator("#timeline .plot-container").count() == 1
        if shot:
            draw_shown_charts(page)  # the page draws a chart once it is near the screen
            page.screenshot(path=shot, full_page=True)
        page.get_by_role("tab", name="About").click()
        page.wait_for_selector("text=Model card: the embedded SpecLab models", timeout=10_000)
        assert page.locator("text=held-out loss").count() > 0

        page.get_by_role("tab", name="Compare").click()
        page.locator("#examples button").nth(1).click()
        page.wait_for_function("(want) => document.querySelector('#prompt textarea').value === want",
                               arg=example_prompts()[1], timeout=10_000, polling=POLL_MS)
        page.locator("input[type=file]").first.set_input_files(str(ASSETS / "lessons" / "greedy.json"))
        page.wait_for_selector("#status :text('opened from a file')", timeout=30_000)
        page.get_by_role("tab", name="Step through").click()
        page.locator("input[type=file]").nth(1).set_input_files(str(ASSETS / "lessons" / "sampled.json"))
        page.wait_for_selector("#step-status :text('sampled.json')", timeout=30_000)
    finally:
        context.close()
    assert not console_errors, console_errors


def test_a_share_link_restores_the_controls_and_runs_on_its_own(app_url, chromium, embedded_engine):
    query = ("prompt=def%20f(x)%3A&methods=baseline,dflash&max_new_tokens=12&temperature=0&seed=9007199254740993"
             "&colour=red&projector=1")  # one parameter the app does not know: a message on the page, the rest still used
    context, page, console_errors = open_page(chromium)
    try:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url.rstrip("/"))
        page.goto(f"{app_url}?{query}", wait_until="load")
        page.wait_for_selector("#status :text('done')", timeout=60_000)  # nobody clicked Run
        assert page.locator("#prompt textarea").input_value() == "def f(x):"
        assert page.locator("#max-new-tokens input[type=number]").input_value() == "12"
        checked = page.locator("#lanes input:checked").evaluate_all("els => els.map(e => e.parentElement.textContent)")
        assert [c.strip() for c in checked] == ["Baseline", "DFlash"]
        expected = embedded_engine.generate("def f(x):", GenerationConfig(method="baseline", max_new_tokens=12)).text
        for method in embedded_engine.methods():
            lane = page.locator(f"#lane-{method} .lane-card")
            if method in ("baseline", "dflash"):
                assert lane.get_attribute("data-state") == "done"
                assert "".join(lane.locator(".tokens .tok[data-out]").all_text_contents()) == display_text(expected)
            else:
                assert lane.count() == 0 or not lane.is_visible()  # not selected: hidden, never run
        assert page.locator("#link-notes li").all_text_contents() == ["unknown link parameter 'colour' ignored"]
        assert page.locator("#lane-dflash .sameness").inner_text() == "identical to the baseline ✓"
        # ?projector=1: the room's view; drafts that did not enter the output folded away until asked for
        assert "projector" in page.evaluate("document.body.className")
        assert page.locator("#projector input").is_checked()
        ghosts = page.locator("#lane-dflash .tok.ghost")
        if ghosts.count():
            assert not ghosts.first.is_visible()
            page.click("#show-drafts-toggle")
            assert ghosts.first.is_visible()
        # a click pins a token's details in a panel on the page: the same numbers as its hover text
        token = page.locator("#lane-dflash .tok.accepted").first
        token.click()
        pin = page.locator("#token-pin")
        pin.wait_for(state="visible", timeout=5_000)
        details = pin.locator(".pin-text").inner_text()
        assert details == token.get_attribute("title")
        assert "p_target" in details and "p_draft" in details and "target's own top token" in details
        assert page.evaluate("document.body.classList.contains('pinned')")  # room below: the panel covers nothing
        pin.get_by_role("button", name="close").click()
        assert not pin.is_visible()
        token.click()
        pin.wait_for(state="visible", timeout=5_000)
        page.keyboard.press("Escape")  # Escape closes it too
        assert not pin.is_visible() and not page.evaluate("document.body.classList.contains('pinned')")
        # a link to another view of the page (a lane's "the check") keeps projector mode
        followed = page.evaluate("""() => { const a = document.createElement("a"); a.href = "?lesson=2";
            a.textContent = "the check"; a.addEventListener("click", (e) => e.preventDefault());
            document.body.appendChild(a); a.click(); const href = a.href; a.remove(); return href; }""")
        assert "lesson=2" in followed and "projector=1" in followed
        shot = os.environ.get("SPECLAB_SHARE_SCREENSHOT")
        if shot:
            draw_shown_charts(page)  # the page draws a chart once it is near the screen
            page.screenshot(path=shot, full_page=True)

        page.click("#copy-link")
        box = page.locator("#share-link input, #share-link textarea").first
        box.wait_for(timeout=10_000)
        page.wait_for_function("() => document.querySelector('#share-link input, #share-link textarea').value",
                               timeout=10_000, polling=POLL_MS)
        link = box.input_value()
        parts = urlsplit(link)
        assert f"{parts.scheme}://{parts.netloc}{parts.path}" == app_url  # the page's own address
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        assert params["prompt"] == "def f(x):" and params["methods"] == "baseline,dflash"
        assert params["max_new_tokens"] == "12" and params["temperature"] == "0"
        assert params["seed"] == "9007199254740993"  # a seed past 2**53 survives the page and the link exactly
        assert page.evaluate("navigator.clipboard.readText()") == link
    finally:
        context.close()
    assert not console_errors, console_errors


def test_step_through_replays_the_last_run_step_by_step(app_url, chromium, embedded_engine):
    """Run on Compare (a link: temperature 1, a fixed seed, the rejection rule), then step through it: a
    rejected token's numbers read exactly as the engine's trace, Pause holds, and Play walks to the last step."""
    from urllib.parse import parse_qsl

    from app.links import parse_query
    from engine.contract.methods import method_label
    from app.tabs.step import fmt

    # DSpark cuts statically: its throughput scheduler reads measured speeds, so its trace would vary by run
    query = ("prompt=def%20area(r)%3A&methods=eagle3,dspark&temperature=1&seed=11&max_new_tokens=16&verify_rule=rejection"
             "&scheduler=static")
    methods = embedded_engine.methods()
    settings, messages = parse_query(parse_qsl(query), default_settings(methods), available=methods)
    assert not messages
    lanes = {m: embedded_engine.generate(settings.prompt, settings.config(m)) for m in settings.methods}
    last = max(len(r.steps) for r in lanes.values())  # the prefill is step 0
    rejections = [(s.index, m, p, t) for m, r in lanes.items() for s in r.steps
                  for p, t in enumerate(s.drafted, start=1) if t.verdict == "rejected" and t.draw is not None]
    i, method, position, token = min(rejections, key=lambda rejection: rejection[0])  # the earliest such step
    key = f"{method}:{position}"
    context, page, console_errors = open_page(chromium)
    try:
        page.goto(f"{app_url}?{query}", wait_until="load")
        page.wait_for_selector("#status :text('done')", timeout=60_000)
        page.get_by_role("tab", name="Step through").click()
        page.click("#step-show-last")
        page.wait_for_selector('#step-blocks .st-lanes[data-step="0"]', timeout=10_000)
        assert page.locator("#step-slider input[type=range]").get_attribute("max") == str(last)
        for _ in range(i):
            page.click("#step-next")
        page.wait_for_selector(f'#step-blocks .st-lanes[data-step="{i}"]', timeout=10_000)
        assert page.locator("#step-slider input[type=number]").input_value() == str(i)
        label = f"{method_label(method)} · {position} · {token.text!r} (rejected)"
        options = page.locator("#step-token [role=option]")
        for pick in ("another", label):  # the step opens on its first rejection: select another token, then it
            page.click("#step-token input")
            options.first.wait_for(timeout=10_000)
            if pick == label:
                options.and_(page.locator(f"[aria-label={json.dumps(label, ensure_ascii=False)}]")).click()
            else:
                options.and_(page.locator(f":not([aria-label={json.dumps(label, ensure_ascii=False)}])")).last.click()
                page.wait_for_selector(f'#step-blocks .st-tok.selected:not([data-key="{key}"])', timeout=10_000)
        selected = page.locator(f'#step-blocks .st-tok.selected[data-key="{key}"]')
        selected.wait_for(timeout=10_000)
        shown = {name: selected.locator(f'[data-num="{name}"]').inner_text()
                 for name in ("p_draft", "p_target", "accept", "r", "verdict")}
        assert shown == {"p_draft": fmt(token.draft_prob), "p_target": fmt(token.target_prob),
                         "accept": fmt(token.accept_prob), "r": fmt(token.draw), "verdict": "rejected"}
        page.locator("#step-draft-dist").scroll_into_view_if_needed()  # a chart is drawn once it is near the screen
        page.wait_for_selector(f"#step-draft-dist :text('r = {fmt(token.draw)}')", timeout=10_000)
        assert page.locator("#step-target-dist .bars path").count() > 0
        page.locator("#step-timeline").scroll_into_view_if_needed()
        page.wait_for_selector("#step-timeline .plot-container", timeout=10_000)
        assert page.locator("#step-timeline .plot-container").count() == 1
        shot = os.environ.get("SPECLAB_STEP_SCREENSHOT")
        if shot:
            draw_shown_charts(page)  # the page draws a chart once it is near the screen
            page.screenshot(path=shot, full_page=True)
        shown_selector = "#step-slider input[type=number]"
        step_shown = page.locator(shown_selector)
        page.click("#step-play")
        # Play moved on (a step can be drawn over before it shows: a change of the slider replaces a pending one)
        page.wait_for_function(f"() => Number(document.querySelector('#step-slider input[type=number]').value) > {i}",
                               timeout=10_000, polling=POLL_MS)
        page.click("#step-pause")
        # Ticks already sent may still land after the click (on a loaded machine, half a second or more later):
        # Pause holds when the step then stays put for three ticks' time short of the end (a Pause that did nothing
        # would walk on to the last step)
        paused = held_still(page, shown_selector, quiet_ms=3_000 * TICK_S, timeout_ms=15_000)
        assert int(paused) < last, f"Pause did not stop Play before the last step ({last}; Play started at {i})"
        page.click("#step-play")
        page.wait_for_selector(f'#step-blocks .st-lanes[data-step="{last}"]', timeout=10_000 + 1_000 * last)
        page.wait_for_timeout(2_000 * TICK_S + 300)  # two more ticks' time: it stays at the end
        assert step_shown.input_value() == str(last)
        assert page.locator(f'#step-blocks .st-lanes[data-step="{last}"]').count() == 1
    finally:
        context.close()
    assert not console_errors, console_errors


def test_a_tree_lane_steps_through_as_a_drawn_tree(app_url, chromium, embedded_engine):
    """A link with both tree lanes: every tree step is drawn whole (its nodes, the accepted path, the bonus) inside
    its lane at 1024×768, and the path the drawing marks is the one the engine accepted."""
    from urllib.parse import parse_qsl

    from app.links import parse_query

    query = "prompt=import%20os%0A&methods=baseline,eagle3_tree,dflash_tree&max_new_tokens=16&tree_nodes=12"
    methods = embedded_engine.methods()
    settings, messages = parse_query(parse_qsl(query), default_settings(methods), available=methods)
    assert not messages and settings.tree_nodes == 12
    lanes = {m: embedded_engine.generate(settings.prompt, settings.config(m)) for m in ("eagle3_tree", "dflash_tree")}
    context, page, console_errors = open_page(chromium)
    try:
        page.set_viewport_size({"width": 1024, "height": 768})
        page.goto(f"{app_url}?{query}", wait_until="load")
        page.wait_for_selector("#status :text('done')", timeout=60_000)
        assert page.locator("#tree-nodes input[type=number]").input_value() == "12"
        page.get_by_role("tab", name="Step through").click()
        page.click("#step-show-last")
        page.wait_for_selector('#step-blocks .st-lanes[data-step="0"]', timeout=10_000)
        page.click("#step-next")
        page.wait_for_selector('#step-blocks .st-lanes[data-step="1"]', timeout=10_000)
        for method, result in lanes.items():
            step = result.steps[0]
            lane = page.locator(f'#step-blocks .st-lane[data-method="{method}"]')
            tree = lane.locator(".st-tree svg.draft-tree")
            assert lane.locator(".st-tree").get_attribute("data-nodes") == str(len(step.drafted)) == "12"
            verdicts = tree.locator(".tree-node").evaluate_all("nodes => nodes.map(n => n.dataset.verdict)")
            # the anchor, every node, the bonus
            assert len(verdicts) == len(step.drafted) + 2 and verdicts[-1] == "bonus"
            assert verdicts.count("accepted") == step.num_accepted + 1  # the path and the anchor it hangs under
            assert verdicts.count("rejected") == sum(t.verdict == "rejected" for t in step.drafted)
            box, lane_box = tree.bounding_box(), lane.bounding_box()
            assert box["height"] > 0 and lane_box["x"] + lane_box["width"] <= 1024  # in its lane, on the screen
    finally:
        context.close()
    assert not console_errors, console_errors
