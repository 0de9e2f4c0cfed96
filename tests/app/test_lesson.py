"""The Lesson tab: nine points, each with a takeaway computed from the shipped recordings; "Show me" opens the
right tab with the recording and what to look at; links open a point or a tab, and a bad one gets one line;
the recordings are small, current with the code's settings, and read like any saved comparison."""

from __future__ import annotations

import html
import json
from types import SimpleNamespace

import pytest

gr = pytest.importorskip("gradio")

from app import lesson  # noqa: E402
from app.lesson import POINTS, RECORDINGS, recorded  # noqa: E402
from app.links import parse_query  # noqa: E402
from app.draw.charts import PROJECTOR_FONT  # noqa: E402
from app.comparison import settings_dict  # noqa: E402

from conftest import OUTLINED_FOR_JS, POLL_MS, SETTLED_MS, needs_chromium, page_on  # noqa: E402



def test_the_recordings_are_shipped_small_and_made_with_the_lessons_settings():
    sizes = [(lesson.LESSONS_DIR / name).stat().st_size for name in RECORDINGS.values()]
    assert sum(sizes) <= 5_000_000
    found = recorded()
    assert set(found) == set(RECORDINGS)
    for key, temperature in (("greedy", 0.0), ("sampled", 1.0)):
        comparison = found[key]
        expected = settings_dict(lesson.comparison_settings(list(comparison.lanes), temperature))
        assert comparison.settings == expected, key  # recorded with what "Run it live" runs
        assert len({lane.summary.num_new_tokens for lane in comparison.lanes.values()}) == 1
    greedy = found["greedy"]  # temperature 0: every lane wrote the baseline's text
    assert len({tuple(t.id for s in lane.steps for t in s.committed) for lane in greedy.lanes.values()}) == 1
    sweeps = found["sweeps"]["data"]["sweeps"]
    assert list(sweeps) == lesson.serial_methods(list(greedy.lanes))
    for sweep in sweeps.values():
        assert sorted(map(int, sweep["rows"])) == list(lesson.SWEEP_KS)
        assert sweep["num_prompts"] == lesson.SWEEP_PROMPTS
    check = found["lossless"]["data"]
    assert check["samples"] == lesson.LOSSLESS_SAMPLES and check["temperature"] == 1.0
    assert set(check["lanes"]) == set(lesson.chain_methods(list(greedy.lanes)))  # every drafting lane passes at T = 1
    assert all(lane["p_value"] > 0.001 and lane["dof"] >= 3 for lane in check["lanes"].values())


def point_of(recording: str):
    return next(p for p in POINTS if p.recording == recording)


def test_every_point_has_a_takeaway_computed_from_what_it_shows():
    data = recorded()
    for point in POINTS:
        text = lesson.takeaway(point, data)
        assert text and "not recorded" not in text, point.number
    sweeps = data["sweeps"]["data"]["sweeps"]
    for method, sweep in sweeps.items():  # the numbers are the recording's own
        best = str(sweep["best_k"])
        assert f"best K is {best} at {sweep['rows'][best]['speedup']:.2f}×" in lesson.takeaway(point_of("sweeps"), data)
    assert "1 − TV predicts" in lesson.takeaway(POINTS[2], data)
    missing = lesson.takeaway(point_of("sweeps"), {k: v for k, v in data.items() if k != "sweeps"})
    assert "not recorded yet" in missing and "sweeps" in missing


def test_a_sampled_comparison_draws_each_lanes_ceiling_beside_its_acceptance():
    from app.draw.charts import comparison_figures

    data = recorded()
    sampled = comparison_figures(data["sampled"])[2]
    ceilings = [trace for trace in sampled.data if "1 − TV" in trace.name and trace.x != (None,)]
    drafting = [m for m in data["sampled"].lanes if m != "baseline"]
    assert len(ceilings) == len(drafting)  # every drafting lane
    assert all(trace.line.dash == "dash" for trace in ceilings)
    assert not any("1 − TV" in trace.name for trace in comparison_figures(data["greedy"])[2].data)


@pytest.fixture(scope="module")
def built(random_engine):
    """The app with its defaults, built once per test process (compare_support.default_app): each test calls its
    handlers as a visitor of its own."""
    from compare_support import default_app

    demo = default_app(random_engine)
    load = next(d for d in demo.fns.values() if d.name == "on_load")
    return demo, load.fn.__self__, [getattr(o, "elem_id", None) for o in load.outputs], load.outputs


def _value(outputs, components, elem_id):
    return outputs[[getattr(c, "elem_id", None) for c in components].index(elem_id)]


def test_show_me_opens_each_points_tab_with_its_recording_and_what_to_look_at(built):
    demo, handlers, ids, components = built
    visitor = SimpleNamespace(session_hash="lesson-visitor")
    for point in POINTS:
        outputs = handlers.on_show(point.number, visitor)
        assert len(outputs) == len(components)
        assert outputs[0]["selected"] == point.tab
        focus = _value(outputs, components, f"{point.tab}-focus")
        assert focus["visible"] and f"Lesson point {point.number}" in focus["value"]
        if point.tab == "compare":
            status = _value(outputs, components, "status")
            assert "nothing was rerun" in status and f"lesson point {point.number}" in status
            assert _value(outputs, components, "prompt") == lesson.lesson_prompt()
            assert _value(outputs, components, "temperature") == recorded()[point.recording].settings["temperature"]
            # the recording becomes the session's last run: Step through and Why read it
            assert handlers.sessions.get("lesson-visitor").last is recorded()[point.recording]
        else:
            assert "Not recorded" not in _value(outputs, components, "why-sweep-table")
    step = handlers.on_step(visitor)
    assert step[0]["selected"] == "step" and "rejected" in _value(step, components, "step-focus")["value"]


def test_every_points_chart_is_on_its_points_tab(built):
    """What a point's Show me and its link outline (app/draw/projector.py speclabFocus, by the chart's elem_id)."""
    demo = built[0]
    tabs = {}
    for block in demo.blocks.values():
        tab = block
        while tab is not None and not isinstance(tab, gr.Tab):
            tab = getattr(tab, "parent", None)
        if getattr(block, "elem_id", None) and tab is not None:
            tabs.setdefault(block.elem_id, set()).add(tab.id)
    assert {p.number: tabs.get(p.chart) for p in POINTS} == {p.number: {p.tab} for p in POINTS}


def test_run_it_live_measures_the_points_comparison_again(built, monkeypatch):
    _, handlers, _, components = built
    monkeypatch.setattr(lesson, "LIVE_TIMING_RUNS", 1)  # each lane run once: that it runs again, not its timings
    visitor = SimpleNamespace(session_hash="live-visitor")
    prepared = handlers.prepare_live(3, visitor)
    assert prepared[0]["selected"] == "compare" and "measured live" in _value(prepared, components, "compare-focus")["value"]
    *_, last = handlers.run_live(3, visitor)  # the Compare tab's own run, streamed
    assert "done" in last[0]
    ran = handlers.sessions.get("live-visitor").last
    assert ran is not recorded()["sampled"] and ran.settings["temperature"] == 1.0 and ran.settings["seed"] == 0


def test_run_it_live_measures_the_points_sweep_on_the_lessons_prompts(built, monkeypatch):
    _, handlers, _, components = built
    monkeypatch.setattr(lesson, "LIVE_SWEEP_KS", (1, 2))  # small settings: the handler's path, not the numbers
    monkeypatch.setattr(lesson, "LIVE_SWEEP_TOKENS", 4)
    monkeypatch.setattr(lesson, "LIVE_SWEEP_PROMPTS", 1)
    monkeypatch.setattr(lesson, "load_prompts", lambda: ["def f(x):", "import os"])  # the tiny model's context
    point = next(p for p in POINTS if p.recording == "sweeps")
    prepared = handlers.prepare_live(point.number, SimpleNamespace(session_hash="sweep-visitor"))
    assert prepared[0]["selected"] == "why"
    figure, table, machine = next(handlers.run_live(point.number, SimpleNamespace(session_hash="sweep-visitor")))
    assert "K=1 | K=2 |" in table and "1 prompt(s), 4 new tokens" in table and "× 1 prompt × 1 round" in table
    assert figure.data and machine.data


@pytest.mark.parametrize("query, tab, message", [
    ({"lesson": "4"}, "why", None), ({"lesson": "1"}, "compare", None), ({"tab": "step"}, "step", None),
    ({"lesson": "99"}, "lesson", f"points 1 to {len(POINTS)}"), ({"lesson": "<b>x"}, "lesson", "lesson point '<b>x'"),
    ({"tab": "nowhere"}, "lesson", "there are lesson, compare"),
    ({"lesson": "²"}, "lesson", "lesson point '²'"), ({"lesson": "٣"}, "lesson", f"points 1 to {len(POINTS)}"),  # digits, not ASCII
    ({"lesson": "9" * 5000}, "lesson", f"points 1 to {len(POINTS)}"),
    ({"lesson": "3", "present": "yes"}, "lesson", "present 'yes'; present=1 shows the lesson as slides"),
    ({"lesson": "3", "present": "1"}, None, None),  # the slide shows the point, not its tab
])
def test_a_link_opens_a_point_or_a_tab_and_a_bad_one_gets_one_line(built, query, tab, message):
    _, handlers, _, components = built
    outputs = handlers.on_load(SimpleNamespace(session_hash="link-visitor", query_params=query))
    assert outputs[0] == gr.skip() if tab is None else outputs[0]["selected"] == tab
    status = outputs[1]
    if message:
        assert status["visible"] and message in html.unescape(status["value"]) and "<b>" not in status["value"]
    else:
        assert status == gr.skip()
    assert parse_query(list(query.items()))[1] == []  # not a comparison's parameter: no "unknown parameter" note


@pytest.mark.parametrize("recording, chart", [("load", "why-load-plot"), ("sampled", "acceptance")])
def test_a_projector_link_draws_its_points_chart_for_the_room_before_the_toggle_says_so(built, recording, chart):
    """The page's toggle tells the server of ?projector=1 in an event of its own, which may be answered after the
    link's: the link's chart is drawn for the room all the same, and a link without it for the page."""
    _, handlers, _, components = built
    point = point_of(recording)
    for session, query, size in ((f"room-{recording}", {"lesson": str(point.number), "projector": "1"}, PROJECTOR_FONT),
                                 (f"desk-{recording}", {"lesson": str(point.number)}, None)):
        outputs = handlers.on_load(SimpleNamespace(session_hash=session, query_params=query))
        assert font_size(_value(outputs, components, chart)) == size, query
    restore = next(d.fn for d in built[0].fns.values() if d.name == "restore")  # the Compare tab's link handler
    restore(SimpleNamespace(session_hash=f"link-{recording}", query_params={"projector": "1"}))
    assert handlers.sessions.get(f"link-{recording}").projector


def font_size(plot) -> float | None:
    """A chart output's layout font size: a figure, or what the page's replay cache keeps (gr.Plot's own data)."""
    layout = plot.layout if hasattr(plot, "layout") else json.loads(plot.plot)["layout"]
    return (layout.get("font") or {}).get("size") if isinstance(layout, dict) else layout.font.size


IN_VIEW_JS = """(el) => { const r = el.getBoundingClientRect();
                          return r.height > 0 && r.top < window.innerHeight && r.bottom > 0; }"""


def opened(page, point) -> None:
    """Wait for a lesson link's point to be shown: its note on its tab, and what that tab draws after the note."""
    page.wait_for_selector(f"#{point.tab}-focus :text('Lesson point {point.number}')", timeout=30000)
    if point.tab == "compare":
        page.wait_for_selector("#status :text('nothing was rerun')", timeout=30000)
    elif point.recording == "sweeps":  # each serial lane's optimum starred (plotly draws after the note)
        page.locator("#why-sweep :text('best K = ')").nth(1).wait_for(timeout=30000)


def notes_pins_and_outlines_clear_on_another_tab_and_a_setting(page, point) -> None:
    """On a Compare point's link, its note shown and its chart outlined: a pinned token's numbers, the note and the
    outline go when the lecturer opens another tab; the point's note, shown again by its Show me (the recording
    already on the tab: a second of CPU less than another point's), goes when the lecturer changes a setting."""
    page.wait_for_selector("#acceptance.lesson-target", timeout=60000)
    page.locator("#lane-eagle3 .tok[title]").first.click()  # pin a token's numbers
    page.wait_for_selector("#token-pin:not([hidden])", timeout=5000)
    page.get_by_role("tab", name="About").click()  # another tab (one without charts): note, pin and outline go
    page.wait_for_selector("#token-pin[hidden]", state="attached", timeout=5000)
    assert page.locator(".lesson-target").count() == 0
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_selector("#compare-focus", state="hidden", timeout=5000)
    page.get_by_role("tab", name="Lesson").click()
    page.click(f"#lesson-show-{point.number}")  # the point's note again, then the lecturer changes a setting
    page.wait_for_selector(f"#compare-focus :text('Lesson point {point.number}')", timeout=30000)
    page.locator("#prompt textarea").fill("")
    page.locator("#prompt textarea").press_sequentially("def g(y):")  # typed, as a lecturer does
    page.wait_for_selector("#compare-focus", state="hidden", timeout=5000)


def copy_link_confirms_and_the_link_is_the_pages_address(page, url: str) -> None:
    """Copy link (clipboard granted) says it copied, puts the page's link with its settings in the address bar, and
    the link on the clipboard."""
    page.click("#copy-link")
    page.wait_for_selector("#copy-confirm:text('Copied')", timeout=10000)
    assert "prompt=def+g" in page.url or "prompt=def%20g" in page.url  # the link is the page's address now
    assert page.evaluate("navigator.clipboard.readText()").startswith(url.rstrip("/"))


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_lesson_links_and_show_me_open_their_points_outlined_and_a_tab_or_a_setting_clears_them(random_app, chromium):
    """One link of each kind the page handles differently: a recorded comparison (Compare, whose named chart is
    scrolled into view and outlined) and the K sweep (Why, its chart drawn after the note); and a Show me on the
    Lesson tab (Why's parts); point 8's link outlines its chart in tests/browser/test_trees_panel.py. Every point's
    own handler, and that its chart is on its tab, is tested above without a browser. On the comparison's link, no
    stale state: a pinned token, a note and an outline clear when another tab opens or a setting changes, and Copy
    link confirms (the handlers' side in tests/browser/test_stale_state.py). One page: a load costs seconds."""
    compare_point = point_of("sampled")
    assert compare_point.tab == "compare"
    with page_on(chromium, viewport={"width": 1024, "height": 768}) as page:
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=random_app.rstrip("/"))
        page.goto(f"{random_app}?lesson={compare_point.number}")
        opened(page, compare_point)
        chart = page.locator("#acceptance")
        page.wait_for_function(OUTLINED_FOR_JS, arg=["acceptance", SETTLED_MS], timeout=60000,
                               polling=POLL_MS)  # re-scrolls done
        assert chart.evaluate(IN_VIEW_JS)  # the chart, not the top of the tab
        assert chart.evaluate("el => getComputedStyle(el).outlineStyle") == "solid"
        notes_pins_and_outlines_clear_on_another_tab_and_a_setting(page, compare_point)
        copy_link_confirms_and_the_link_is_the_pages_address(page, random_app)
        sweeps = point_of("sweeps")
        page.goto(f"{random_app}?lesson={sweeps.number}")
        opened(page, sweeps)
        page.wait_for_function(OUTLINED_FOR_JS, arg=[sweeps.chart, SETTLED_MS], timeout=60000,
                               polling=POLL_MS)  # the sweep outlined, its late scrolls past: none moves the tab bar
        page.get_by_role("tab", name="Lesson").click()  # under the click
        page.click(f"#lesson-show-{point_of('parts').number}")
        page.wait_for_function(OUTLINED_FOR_JS, arg=["why-parts-plot", SETTLED_MS], timeout=60000,
                               polling=POLL_MS)
        assert page.locator("#why-parts-plot").evaluate(IN_VIEW_JS)
        assert page.locator(".lesson-target").count() == 1  # the last point's chart only, not the sweep's
        scrolled_away_the_page_stays(page, point_of("parts"))


def scrolled_away_the_page_stays(page, point) -> None:
    """Show me again (its chart drawn already: the same figure draws nothing), and the lecturer scrolls to the top as
    soon as the chart is outlined: the page's later scrolls to the chart (400 and 1200 ms on) do not pull it back."""
    page.get_by_role("tab", name="Lesson").click()
    page.wait_for_selector(".lesson-target", state="detached", timeout=5000)  # another tab: the outline gone
    page.click(f"#lesson-show-{point.number}")
    page.wait_for_selector(f"#{point.chart}.lesson-target", timeout=30000)  # outlined anew
    page.mouse.move(512, 400)
    page.mouse.wheel(0, -50_000)
    page.wait_for_timeout(SETTLED_MS)
    assert page.evaluate("window.scrollY") < 200 and not page.locator(f"#{point.chart}").evaluate(IN_VIEW_JS)
