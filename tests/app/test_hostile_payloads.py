"""What an API client can send to the page's own events that a browser never would: an infinite step, a
string where a file goes, an example that does not exist. Each is answered in one line in the app's words,
through the served app (Gradio's own checks included), with no traceback in the log."""

from __future__ import annotations

import math

import pytest

gr = pytest.importorskip("gradio")

from app.comparison import MAX_FILE_BYTES, RecordError, read_comparison  # noqa: E402
from app.tabs.step import step_number  # noqa: E402

from compare_support import raw_inputs  # noqa: E402
from conftest import launch_locally  # noqa: E402
from scripts.app_client import App  # noqa: E402

NOT_FILES = ["/nonexistent/saved.json", "/etc/hostname", {"path": "/etc/hostname"}, {"a": 1}, None, 5, []]
NOT_STEPS = [math.inf, -math.inf, math.nan, "1e999", "-1e999", 10**400, "9" * 5000, 1e308, {"x": 1}]


@pytest.fixture(scope="module")
def built(random_engine):
    from app.main import build_app

    return build_app(random_engine)


@pytest.fixture(scope="module")
def served(built):
    yield App(launch_locally(built))
    built.close()


def assert_clean_log(capfd):
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, (out + err)[-3000:]


def test_a_step_that_is_not_a_finite_number_is_a_step_at_either_end():
    for raw, expected in [(math.inf, 9), (-math.inf, 0), (math.nan, 0), ("1e999", 9), (10**400, 0), ("9" * 5000, 9),
                          (1e308, 9), (-1e308, 0), ("4", 4), (4.7, 4)]:
        assert step_number(raw, 9) == expected, raw


def _triggered_by(app: App, elem_id: str, event: str) -> int:
    """The index of the event that `event` on the component `elem_id` triggers."""
    component = next(c["id"] for c in app.config["components"] if c.get("props", {}).get("elem_id") == elem_id)
    return next(d["id"] for d in app.config["dependencies"] if [component, event] in d["targets"])


def test_the_step_controls_answer_any_number(served, capfd):
    session = "hostile-stepper"
    run = raw_inputs(prompt="def f(x):\n", methods=["baseline", "eagle3"], drafts_per_step_serial=3, max_new_tokens=6,
                     seed="0")
    assert "done" in served.call(served.fn_index(api_name="run"), run, session=session)["outputs"][0]
    shown = served.call(_triggered_by(served, "step-show-last", "click"), [], session=session)
    assert "Your last run" in shown["outputs"][0]  # the session now steps through a run, so each value is read
    capfd.readouterr()
    for elem, event in (("step-slider", "change"), ("step-previous", "click"), ("step-next", "click"),
                        ("step-play", "click")):
        index = _triggered_by(served, elem, event)
        for raw in NOT_STEPS:
            answer = served.call(index, [raw], session=session)
            assert answer["ok"], (elem, raw, answer["error"])
    assert_clean_log(capfd)


def test_an_open_that_is_sent_no_file_says_so_in_one_line(served, capfd):
    capfd.readouterr()
    compare, step = served.fn_index(api_name="open_saved"), served.fn_index(first_input_elem="step-upload")
    for payload in NOT_FILES:
        status = served.call(compare, [payload, True])["outputs"][0]
        assert "⚠ no file arrived: open a saved comparison" in status, (payload, status)
        status = served.call(step, [payload])["outputs"][0]
        assert "⚠ Could not open that file: no file arrived" in status, (payload, status)
    assert_clean_log(capfd)


def test_an_example_that_does_not_exist_is_named_in_one_line(served, capfd):
    from app.examples import example_prompts

    capfd.readouterr()
    index = served.fn_index(first_input_elem="examples")
    assert served.call(index, [1])["outputs"] == [example_prompts()[1]]
    for raw in (len(example_prompts()), -1, "x", None, 1e300, [1], True):
        answer = served.call(index, [raw])
        assert not answer["ok"] and answer["error"].startswith("there is no example ") and "\n" not in answer["error"]
    assert_clean_log(capfd)


def test_an_oversized_file_is_refused_with_its_real_size():
    head = b" " * (MAX_FILE_BYTES + 1)  # what a reader takes of a 31.6 MB file: its first bytes
    with pytest.raises(RecordError, match=r"^the file is 31\.6 MB; a saved comparison is at most 10 MB \(10,000,000"):
        read_comparison(head, size=31_600_000)
    with pytest.raises(RecordError, match=r"^the file is 12\.0 MB"):
        read_comparison(b" " * 12_000_000)


def test_an_upload_over_the_files_limit_is_refused_where_it_arrives(served):
    import httpx

    url = served.base + "/gradio_api/upload"
    small = httpx.post(url, files={"files": ("saved.json", b"{}", "application/json")}, timeout=60)
    assert small.status_code == 200
    big = httpx.post(url, files={"files": ("saved.json", b" " * (MAX_FILE_BYTES + 1), "application/json")},
                     timeout=60)
    assert big.status_code == 413, big.text[:200]


def test_gradios_cache_is_swept_on_a_schedule(built):
    from app.main import CACHE_AGE_S, CACHE_SWEEP_S

    assert built.delete_cache == (CACHE_SWEEP_S, CACHE_AGE_S)
    assert CACHE_SWEEP_S <= 3600 and CACHE_AGE_S <= 24 * 3600


def test_download_files_are_one_per_comparison_and_at_most_a_few_hundred(tmp_path, monkeypatch):
    """Sessions downloading one comparison (a class on a recorded link) share one file; past `keep` distinct
    comparisons the least recently offered files go."""
    import os
    import tempfile

    from app.tabs.compare import download_path

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    paths = []
    for i in range(30):
        paths.append(download_path(f'{{"run": {i}}}', keep=10))
        os.utime(paths[-1], (i, i))  # offered in order, a second apart
    assert download_path('{"run": 29}', keep=10) == paths[29] and paths[29].read_text() == '{"run": 29}'
    kept = list((tmp_path / "speclab-comparisons").iterdir())
    assert len(kept) <= 10 and paths[29] in kept and paths[0] not in kept
    assert len(set(paths)) == 30


def test_a_right_to_left_override_cannot_reorder_what_the_page_draws(random_engine):
    """U+202E in a prompt, a file's drafter or device, a token or a status: never drawn as a control (it would
    reverse everything after it), but as its name; right-to-left letters are kept, each text isolated."""
    from dataclasses import replace

    from app.comparison import Comparison
    from app.draw.render import BIDI_CONTROLS, chart_label, lane_html, status_html
    from app.tabs.step import blocks_html
    from app.draw.theme import CSS
    from engine.contract.types import GenerationConfig

    prompt = "name = 'abc\u202e.txt'  # \u2067مرحبا\u2069\n"
    result = random_engine.generate(prompt, GenerationConfig(method="eagle3", max_new_tokens=6, drafts_per_step=2))
    steps = [result.prefill, *result.steps]
    first = steps[1].committed[0]
    steps[1] = replace(steps[1], committed=(replace(first, text="\u202e" + first.text), *steps[1].committed[1:]))
    comparison = Comparison.of_steps(dict(prompt=prompt, methods=["eagle3"], temperature=0.0, max_new_tokens=6),
                                     {"eagle3": steps}, drafters={"eagle3": "evil\u202edrafter"}, device="cpu\u202e",
                                     preset="random")
    drawn = {"lane": lane_html(comparison, "eagle3"), "live lane": lane_html(comparison, "eagle3", live=True),
             "step": blocks_html(comparison, 1), "status": status_html(f"recorded on {comparison.device}"),
             "chart label": chart_label("\u202eab")}
    for where, text in drawn.items():
        assert not [hex(c) for c in BIDI_CONTROLS if chr(c) in text], where
        assert "\u27e8RLO\u27e9" in text, where
    assert "مرحبا" in drawn["lane"] and "\u27e8RLI\u27e9" in drawn["lane"]  # the letters stay; the control is named
    isolated = next(rule for rule in CSS.split("}") if "unicode-bidi: isolate" in rule)
    assert all(name in isolated for name in (".tokens", ".prompt-text", ".st-context", ".st-text", ".srv-text"))
