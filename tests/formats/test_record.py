"""Export and import of a comparison: the JSON round-trips every lane exactly, malformed or oversized files
are refused in one line, and an opened file shows its lanes without running a model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

gr = pytest.importorskip("gradio")

from app.comparison import MAX_FILE_BYTES, RecordError, read_comparison  # noqa: E402
from app.settings import default_settings  # noqa: E402

from compare_support import comparison_of  # noqa: E402

PROMPT = "def parse(self, text):\n"


@pytest.fixture(scope="module")
def comparison(random_engine):
    return comparison_of(random_engine, ("baseline", "eagle3", "dspark"), PROMPT, drafters={"eagle3": "small LM, 2 layers"},
                         device="cpu (2 threads)", max_new_tokens=16, temperature=0.8, drafts_per_step=3, seed=4)


def test_a_comparison_round_trips_exactly(comparison):
    again = read_comparison(comparison.to_json().encode())
    # every step, token, probability, draw and span, and every field around them; a lane read back says so
    assert again == replace(comparison, lanes={m: replace(lane, state="recorded") for m, lane in comparison.lanes.items()})
    # each lane's summary is the one computed when it ended: why it ended travels in the file, with no preset
    assert [lane.summary for lane in again.lanes.values()] == [lane.summary for lane in comparison.lanes.values()]
    assert {lane.summary.finish_reason for lane in again.lanes.values()} == {"length"}


def test_a_file_saved_before_steps_carried_why_a_run_ended_still_opens(comparison):
    doc = json.loads(comparison.to_json())
    for steps in doc["lanes"].values():
        for step in steps:
            step.pop("finish_reason")
            for span in step["spans"]:
                span.pop("work")  # the trace's first name for the kind of work was "lane"
    old = read_comparison(json.dumps(doc))
    assert old.steps == comparison.steps  # a lane that wrote max_new_tokens ended on length
    assert all(lane.summary == comparison.lanes[m].summary for m, lane in old.lanes.items())


def test_a_tree_comparison_round_trips_and_a_file_from_before_trees_still_opens(random_engine, comparison):
    trees = comparison_of(random_engine, ("baseline", "dflash_tree"), PROMPT, max_new_tokens=16, tree_nodes=9)
    again = read_comparison(trees.to_json().encode())
    assert again.steps == trees.steps and again.settings["tree_nodes"] == 9
    assert all(s.parents is not None and len(s.parents) == 9 for s in again.steps["dflash_tree"][1:] if s.drafted)
    doc = json.loads(comparison.to_json())
    doc["settings"].pop("tree_nodes")  # saved before the tree lanes had their budget
    assert read_comparison(json.dumps(doc)).settings["tree_nodes"] == default_settings().tree_nodes


@pytest.mark.parametrize("mutate, message", [
    (lambda doc: "not json at all", "not a JSON file"),
    (lambda doc: json.dumps({**doc, "format": "other/1"}), "not a SpecLab comparison"),
    (lambda doc: json.dumps({**doc, "lanes": {}}), "no lanes"),
    (lambda doc: json.dumps({**doc, "lanes": {"eagle9": doc["lanes"]["eagle3"]}}), "unknown method"),
    (lambda doc: json.dumps({**doc, "lanes": {"eagle3": [{"index": 0}]}}), "malformed"),
    (lambda doc: json.dumps({**doc, "lanes": {"eagle3": doc["lanes"]["eagle3"][1:]}}), "prefill"),
    (lambda doc: json.dumps({**doc, "settings": None}), "no settings"),
    (lambda doc: json.dumps({**doc, "settings": {**doc["settings"], "max_new_tokens": "lots"}}), "settings are invalid"),
    (lambda doc: json.dumps({**doc, "settings": {"prompt": "x"}}), "settings lack"),
    (lambda doc: " " * (MAX_FILE_BYTES + 1), "at most"),
])
def test_bad_files_are_refused_in_one_line(comparison, mutate, message):
    doc = json.loads(comparison.to_json())
    with pytest.raises(RecordError, match=message) as err:
        read_comparison(mutate(doc))
    assert "\n" not in str(err.value)


def test_opening_a_saved_comparison_shows_its_lanes_without_running_a_model(random_engine, random_app, comparison,
                                                                          tmp_path, monkeypatch):
    import html
    import re

    from gradio_client import Client, handle_file

    from app.draw.render import display_text
    from app.tabs.compare import NUM_CHARTS

    client = Client(random_app, verbose=False)  # the app over random_engine, served once per test process
    path = tmp_path / "saved.json"
    path.write_text(comparison.to_json(), encoding="utf-8")

    def no_model(*args, **kwargs):
        raise AssertionError("opening a saved comparison must not run a model")

    monkeypatch.setattr(random_engine, "stream", no_model)
    monkeypatch.setattr(random_engine, "generate", no_model)
    outputs = client.predict(handle_file(str(path)), True, api_name="/open_saved")
    status, *lanes = outputs[:-NUM_CHARTS]
    assert "nothing was rerun" in status and "opened from a file" in status
    # Lanes come back as updates: shown ones with their HTML, the others hidden.
    shown = {m: lane["value"] for m, lane in zip(random_engine.methods(), lanes) if lane.get("visible")}
    assert set(shown) == set(comparison.lanes)
    for method, steps in comparison.steps.items():
        spans = re.findall(r'<span class="tok [^"]*" data-out title="[^"]*">(.*?)</span>', shown[method], flags=re.S)
        text = "".join(t.text for step in steps for t in step.committed)
        assert "".join(html.unescape(x) for x in spans) == display_text(text), method

    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    status = client.predict(handle_file(str(bad)), True, api_name="/open_saved")[0]
    assert "cannot open that file" in status and "not a SpecLab comparison" in status


@pytest.fixture(scope="module")
def built(random_engine):
    """The app with its defaults, built once (compare_support.default_app); each test calls its handlers as
    visitors of its own, on a link or a file no other test opens."""
    from compare_support import default_app

    return default_app(random_engine)


def test_a_share_link_opened_again_shows_the_recorded_run_drawn_once(random_engine, built, monkeypatch):
    """Thirty students opening one link: the first visit runs the models, later ones get that run, drawn once.
    (A page's load event and the link's own run event, called as the page calls them.)"""
    from types import SimpleNamespace

    from app.settings import PARSERS
    from app.run.runner import TIMING_RUNS
    from app.tabs.compare import LaneViews

    fns = {dep.name: dep.fn for dep in built.fns.values()}
    query = {"prompt": "def g(y):", "methods": "baseline,ar", "max_new_tokens": "10"}
    runs, drawn = [], []
    real_stream, real_draw = random_engine.stream, LaneViews.draw
    monkeypatch.setattr(random_engine, "stream", lambda *a, **k: runs.append(a) or real_stream(*a, **k))
    monkeypatch.setattr(LaneViews, "draw", lambda *a, **k: drawn.append(1) or real_draw(*a, **k))

    def visit(i: int) -> str:
        page = SimpleNamespace(session_hash=f"student{i}", query_params=query)
        outputs = fns["restore"](page)  # the controls, the link's notes, its query, then the run's outputs
        link_query, status = outputs[len(PARSERS) + 1], outputs[len(PARSERS) + 2]
        if isinstance(link_query, str) and link_query:  # not recorded yet: the link's own event runs it
            return list(fns["run_link"](link_query, True, page))[-1][0]
        return status

    first = visit(0)
    ran = len(runs)
    assert "done" in first and ran == 2 * TIMING_RUNS  # the first visit ran both lanes (and timed them again)
    drawn.clear()
    later = [visit(i) for i in range(1, 4)]
    assert all("ran before on this server" in status for status in later) and len(runs) == ran  # nothing ran again
    assert len(drawn) == 1  # and the recorded run was drawn for the first of them only


def test_at_most_a_few_sessions_keep_a_file_they_opened(comparison):
    from dataclasses import replace as copy_of

    from app.run.sessions import SessionStore

    store = SessionStore(opened_files=2)
    files = [copy_of(comparison, recorded_at=str(i)) for i in range(3)]
    for i, opened in enumerate(files):
        store.opened(f"s{i}", opened)
    assert store.get("s0").last is None and store.get("s0").shown is None  # the oldest file was forgotten
    assert store.get("s1").last is files[1] and store.get("s2").shown is files[2]
    store.get("s1").last = comparison  # a run since: what it holds now is not the file, and stays
    store.opened("s3", files[0])
    assert store.get("s1").last is comparison and store.get("s1").shown is None


def test_a_recorded_runs_device_text_is_escaped_once_wherever_it_shows(built, comparison):
    """A file's device text is plain text: each view escapes it exactly once (`<b>` shows as typed, never as
    `&lt;b&gt;` on the page, never as markup)."""
    from types import SimpleNamespace

    from app.draw.render import status_html
    from app.tabs.step import describe

    odd = replace(comparison, device="<b>GPU</b> & co")
    once = "&lt;b&gt;GPU&lt;/b&gt; &amp; co"
    fns = {dep.name: dep.fn for dep in built.fns.values()}
    status = fns["open_saved"](odd.to_json().encode(), True, SimpleNamespace(session_hash="s"))[0]
    assert once in status and "<b>GPU" not in status and "&amp;lt;" not in status
    step_status = status_html(describe(odd, "opened from a file"))
    assert once in step_status and "&amp;lt;" not in step_status
