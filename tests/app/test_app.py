"""The app: it builds without launching, its run handler works through gradio_client against a locally
launched app, what it draws matches the engine's own output, share links round-trip, and hostile input
(tampered links, non-numbers, NaN, huge seeds, lone surrogates, a full queue) gets one clear message and
never a traceback in the server's log."""

from __future__ import annotations

import html
import math
import re

import pytest

gr = pytest.importorskip("gradio")

from app.draw.charts import timeline_figure  # noqa: E402
from app.settings import (MAX_PROMPT_CHARS, SettingError, Settings, default_settings, parse_controls,  # noqa: E402
                          repair_text)
from app.links import build_query, parse_query
from app.main import build_app  # noqa: E402
from app.draw.render import display_text, lane_html  # noqa: E402
from app.tabs.compare import NUM_CHARTS  # noqa: E402
from engine.contract.types import MIN_SAMPLING_TEMPERATURE, EngineError, GenerationConfig  # noqa: E402

from conftest import launch_locally  # noqa: E402

PROMPT = "def parse(self, text):\n"
# Every input of the /run endpoint by name (the API takes keywords; tests change what they need).
RUN = dict(prompt=PROMPT, methods=["baseline", "eagle3", "dflash", "dspark"], temperature=0.0, serial_k=4, drafts_per_block=7,
           max_new_tokens=24, seed=0, verify_rule="rejection", show_drafts=True, scheduler="throughput",
           confidence_threshold=0.5, overlap="auto")


def lane_of(method: str, steps, state: str = "done", temperature: float = 0.0):
    """A comparison of one lane, as the Compare tab holds it: ended lanes carry their summary."""
    from dataclasses import replace

    from app.comparison import Comparison, LaneResult, settings_dict

    settings = settings_dict(replace(default_settings(), prompt=PROMPT, temperature=temperature, methods=(method,)))
    lane = LaneResult.ended(method, steps, state=state) if state != "running" else LaneResult(method, tuple(steps),
                                                                                                 state=state)
    return Comparison(settings, {method: lane})


def run(client, **changes):
    return client.predict(**{**RUN, **changes}, api_name="/run")


def output_text_of(lane: str) -> str:
    """The text of the tokens the lane marks as output, as a browser would show it."""
    spans = re.findall(r'<span class="tok [^"]*" data-out title="[^"]*">(.*?)</span>', lane, flags=re.S)
    return "".join(html.unescape(s) for s in spans)


def test_app_imports_no_torch():
    import ast
    from pathlib import Path

    for path in Path(__file__).resolve().parents[2].joinpath("app").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in getattr(node, "names", [])}
        modules = {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert "torch" not in names | modules, path


def test_app_builds_without_launching(random_engine):
    demo = build_app(random_engine)
    assert isinstance(demo, gr.Blocks)
    labels = {getattr(block, "label", None) for block in demo.blocks.values()}
    assert {"Compare", "Why", "About"} <= labels
    lanes = {block.elem_id for block in demo.blocks.values() if str(getattr(block, "elem_id", "")).startswith("lane-")}
    assert lanes == {f"lane-{m}" for m in random_engine.methods()}  # one lane per method the engine can run
    selector = next(b for b in demo.blocks.values() if getattr(b, "label", None) == "Lanes")
    assert [value for _, value in selector.choices] == random_engine.methods()  # registry order
    assert selector.value == [m for m in ("baseline", "eagle3", "dflash", "dspark") if m in random_engine.methods()]


# Emoji: Debian's chromium draws them from no installed font (DejaVu has none), so each shows as an empty box.
# The symbols the page uses (✂ ⚠ τ α ≤ × ◆ ★ → ⏎) are text glyphs DejaVu has.
BMP_EMOJI = set("⌚⌛⏩⏪⏫⏬⏰⏳◽◾☔☕♈♉♊♋♌♍♎♏♐♑♒♓♿⚓⚡⚪⚫⚽⚾⛄⛅⛎⛔⛪⛲⛳⛵⛺⛽✅✊✋✨❌❎❓❔❕❗➕➖➗➰➿⬛⬜⭐⭕")


def emoji_in(text: str) -> list[str]:
    """The emoji in `text`: the emoji planes, the emoji variation selector and joiner, and the text-plane
    characters drawn as emoji by default."""
    return [c for c in text if 0x1F000 <= ord(c) <= 0x1FAFF or c in "\ufe0f\u200d" or c in BMP_EMOJI]


def test_the_page_and_its_example_prompts_have_no_emoji(random_engine):
    import json

    from app.examples import example_prompts

    assert emoji_in("héllo 🚀 ✅ x") == ["🚀", "✅"] and emoji_in("✂ ⚠ τ α ≤ × ◆ ★ → ⏎ ◀ ▶") == []
    page = json.dumps(build_app(random_engine).config, ensure_ascii=False)  # every label, text, chart and style
    assert "Words used on these pages" in page  # the whole page, the About tab included
    assert emoji_in(page) == [] and emoji_in("".join(example_prompts())) == []


def test_a_preset_that_cannot_run_falls_back_to_the_embedded_models(random_engine, monkeypatch, capsys):
    import app.__main__ as entry
    from engine.contract.types import EngineError

    def load_engine(preset, device, threads=None, own_process=True):
        if preset != "tiny":
            raise EngineError(f"preset {preset!r} needs a CUDA GPU and there is none here")
        return random_engine

    served = {}
    monkeypatch.setattr(entry, "load_engine", load_engine)
    monkeypatch.setattr("app.main.launch", lambda demo, **kw: served.setdefault("demo", demo))
    assert entry.main(["--preset", "qwen3-4b"]) == 0
    notice = [b.value for b in served["demo"].blocks.values() if getattr(b, "elem_id", None) == "notice"]
    assert notice and "needs a CUDA GPU" in notice[0] and "embedded models (tiny)" in notice[0]
    assert "warning: preset 'qwen3-4b' needs a CUDA GPU" in capsys.readouterr().err


def test_lane_html_marks_exactly_the_output_tokens(random_engine):
    config = GenerationConfig(method="eagle3", max_new_tokens=30, drafts_per_step=4)
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    lane = lane_html(lane_of("eagle3", steps), "eagle3")
    assert output_text_of(lane) == display_text(result.text)
    assert lane.count('class="tok rejected ghost"') == sum(
        1 for s in result.steps for t in s.drafted if t.verdict == "rejected")
    assert "τ" in lane and "speedup" in lane


def test_timeline_has_one_row_per_lane_and_every_span(random_engine):
    runs = {m: random_engine.generate(PROMPT, GenerationConfig(method=m, max_new_tokens=12, drafts_per_step=3))
            for m in ("baseline", "eagle3")}
    fig = timeline_figure({m: [r.prefill, *r.steps] for m, r in runs.items()})
    drawn = sum(len(trace.x) for trace in fig.data if trace.name != "bubble (gap)")
    assert drawn == sum(len(s.spans) for r in runs.values() for s in (r.prefill, *r.steps))
    draft = next(t for t in fig.data if t.name == "draft")
    assert set(draft.y) == {"AR"}
    assert all(x > 0 for trace in fig.data for x in trace.x)


def test_timeline_draws_a_steps_draft_forwards_in_alternating_shades(random_engine):
    """K draft forwards in a row would merge into one orange bar: the 1st, 3rd, ... of a step take one shade and
    the 2nd, 4th, ... another (one legend entry for both)."""
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=12, drafts_per_step=4))
    fig = timeline_figure({"eagle3": [result.prefill, *result.steps]})
    first, second = [t for t in fig.data if t.legendgroup == "draft"]
    assert first.marker.color != second.marker.color and first.showlegend and not second.showlegend
    odd, even = set(), set()  # each step's draft spans by start, 1st, 3rd, ... and 2nd, 4th, ...
    for step in (result.prefill, *result.steps):
        for i, span in enumerate(s for s in step.spans if s.work == "draft"):
            (even if i % 2 else odd).add(round(span.start_s * 1e3, 9))
    assert len(even) >= len(result.steps) - 1  # K = 4: at least two forwards in every full step
    assert {round(b, 9) for b in first.base} == odd and {round(b, 9) for b in second.base} == even


@pytest.fixture(scope="module")
def launched(random_engine):
    """The app served in this process: (its Blocks, its URL)."""
    demo = build_app(random_engine)
    yield demo, launch_locally(demo)
    demo.close()


@pytest.fixture(scope="module")
def launched_app(launched):
    return launched[1]


@pytest.mark.slow
def test_run_handler_through_gradio_client(launched_app, random_engine):
    from gradio_client import Client

    client = Client(launched_app, verbose=False)
    status, *lanes = run(client)[:-NUM_CHARTS]  # the last four outputs are the charts
    assert "done" in status
    assert len(lanes) == len(random_engine.methods())
    expected = random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=24)).text
    for lane in lanes:  # greedy: every lane writes the baseline's text
        assert output_text_of(lane) == display_text(expected)
        assert 'data-state="done"' in lane


@pytest.mark.slow
def test_only_the_selected_lanes_run(launched_app, random_engine):
    from gradio_client import Client

    status, *lanes = run(Client(launched_app, verbose=False), methods=["dspark", "baseline"])[:-NUM_CHARTS]
    assert "done" in status
    states = {m: re.search(r'data-state="([^"]*)"', lane).group(1) for m, lane in zip(random_engine.methods(), lanes)}
    assert states == {"baseline": "done", "eagle3": "not selected", "dflash": "not selected", "dspark": "done"}


# --- hostile input through the run handler: one clear line in the status, no traceback in the log ----------

BAD_RUNS = [  # (changed inputs, words the status must hold)
    (dict(prompt=""), "prompt is empty"),
    (dict(prompt="x " * 200), "context"),
    (dict(prompt=None), "prompt must be text"),
    (dict(prompt=["def f():"]), "prompt must be text"),
    (dict(prompt="x" * (MAX_PROMPT_CHARS + 1)), f"at most {MAX_PROMPT_CHARS:,}"),
    (dict(seed=-3), "seed must be a whole number"),
    (dict(seed="abc"), "seed must be a whole number"),
    (dict(seed=None), "seed must be a whole number"),
    (dict(seed=[]), "seed must be a whole number"),
    (dict(seed={}), "seed must be a whole number"),
    (dict(seed="nan"), "seed must be a whole number"),
    (dict(seed="inf"), "seed must be a whole number"),
    (dict(seed="-inf"), "seed must be a whole number"),
    (dict(seed=2**63), "seed must be a whole number"),
    (dict(seed=1.5), "seed must be a whole number"),
    (dict(temperature="abc"), "temperature must be a number from 0 to 5"),
    (dict(temperature=None), "temperature must be a number"),
    (dict(temperature={}), "temperature must be a number"),
    (dict(temperature="nan"), "temperature must be a number"),
    (dict(max_new_tokens=[]), "max new tokens must be a whole number from 1 to 512"),
    (dict(max_new_tokens="1e9"), "max new tokens must be a whole number"),
    (dict(serial_k=40), "draft length K must be a whole number from 1 to 16"),
    (dict(drafts_per_block="seven"), "tokens per block must be a whole number"),
    (dict(confidence_threshold=None), "confidence threshold must be a number from 0 to 1"),
    (dict(verify_rule="sometimes"), "unknown verification rule 'sometimes'"),
    (dict(scheduler="often"), "unknown scheduler 'often'"),
    (dict(overlap=None), "unknown overlap None"),
    (dict(methods=[]), "choose at least one lane"),
    (dict(methods=["bogus"]), "unknown method 'bogus'"),
    (dict(methods={}), "lanes must be a list"),
    (dict(methods=[None]), "unknown method None"),
    (dict(methods=["classic"]), "this server has no classic lane"),
    (dict(show_drafts=None), "show drafts must be true or false"),
]


def assert_clean_log(capfd, caplog):
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, err[-2000:]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text[-2000:]


@pytest.mark.slow
def test_hostile_input_gets_one_clear_message_and_no_traceback(launched_app, capfd, caplog):
    from gradio_client import Client

    client = Client(launched_app, verbose=False)
    capfd.readouterr()
    for changes, words in BAD_RUNS:
        status = run(client, **changes)[0]
        assert "status-error" in status and words in html.unescape(status), (changes, status)
        assert status.count("⚠") == 1, status
    assert_clean_log(capfd, caplog)


@pytest.mark.slow
def test_the_status_line_escapes_what_the_user_sent(launched_app):
    from gradio_client import Client

    status = run(Client(launched_app, verbose=False), verify_rule="<img src=x onerror=alert(1)>")[0]
    assert "<img" not in status and "&lt;img src=x" in status


def call_raw(url: str, data: list) -> list:
    """POST the run endpoint's inputs as raw JSON (what a hostile client can send and gradio_client cannot:
    NaN literals, lone surrogates) and return its last outputs."""
    import json

    import httpx

    body = json.dumps({"data": data}, allow_nan=True)  # ensure_ascii: a lone surrogate travels as \ud800
    event_id = httpx.post(f"{url}gradio_api/call/run", content=body, headers={"Content-Type": "application/json"},
                          timeout=30).json()["event_id"]
    with httpx.stream("GET", f"{url}gradio_api/call/run/{event_id}", timeout=60) as response:
        lines = [line for line in response.iter_lines()]
    events = [(lines[i], lines[i + 1]) for i in range(len(lines) - 1) if lines[i].startswith("event:")]
    kind, payload = events[-1]
    assert kind == "event: complete", lines[-4:]
    return json.loads(payload.removeprefix("data:"))


def raw_inputs(**changes) -> list:
    values = {**RUN, **changes}
    return [values[name] for name in ("prompt", "methods", "temperature", "serial_k", "drafts_per_block", "max_new_tokens",
                                      "seed", "verify_rule", "show_drafts", "scheduler", "confidence_threshold",
                                      "overlap")]


@pytest.mark.slow
def test_nan_and_infinity_literals_are_refused(launched_app, capfd, caplog):
    capfd.readouterr()
    for changes, words in [(dict(seed=math.nan), "seed"), (dict(seed=math.inf), "seed"),
                           (dict(temperature=-math.inf), "temperature"), (dict(confidence_threshold=math.nan), "conf")]:
        status = call_raw(launched_app, raw_inputs(**changes))[0]
        assert "status-error" in status and words in status, status
    assert_clean_log(capfd, caplog)


@pytest.mark.slow
def test_a_lone_surrogate_in_the_prompt_does_not_break_the_stream(launched_app, random_engine, capfd, caplog):
    capfd.readouterr()
    prompt = "def f(x):\ud800\n"
    status, *lanes = call_raw(launched_app, raw_inputs(prompt=prompt, methods=["baseline"]))[:-NUM_CHARTS]
    assert "done" in status
    expected = random_engine.generate(repair_text(prompt), GenerationConfig(method="baseline", max_new_tokens=24)).text
    assert output_text_of(lanes[0]) == display_text(expected)
    assert "def f(x):\ufffd" in lanes[0]  # shown as the replacement character, as the engine read it
    assert_clean_log(capfd, caplog)


def test_new_visitors_cost_no_copy_of_the_page_configuration(launched, monkeypatch):
    """Gradio builds every block's configuration for each new session (for its deep links, which this page
    has not); the served app's sessions skip it, and a run through them still works (the other tests here)."""
    from gradio.blocks import BlocksConfig

    from app.hosting.page_sessions import LeanSessionState

    demo, url = launched
    built = []
    real = BlocksConfig.config_for_block
    monkeypatch.setattr(BlocksConfig, "config_for_block",
                        staticmethod(lambda *a, **k: built.append(a[0]) or real(*a, **k)))
    for i in range(3):
        state = demo.server_app.state_holder[f"visitor{i}"]
        assert isinstance(state, LeanSessionState) and not list(state.components)
    status = call_raw(url, raw_inputs(methods=["baseline"], max_new_tokens=4))[0]
    assert "done" in status and built == []


def get_raw(url: str, path: str) -> tuple[int, str]:
    """GET with the standard library (httpx refuses to send an address over 65,536 characters)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_an_over_long_address_gets_the_apps_own_line(launched_app, capfd, caplog):
    """httpx, inside Gradio's page code, refuses an address over 65,536 characters with a traceback; the app
    answers such an address itself (HTTP 414, one line) and serves every shorter one as before."""
    capfd.readouterr()
    status, page = get_raw(launched_app, "/?prompt=" + "x" * 60_000)
    assert status == 200 and "<html" in page
    for path in ("/?prompt=" + "x" * 70_000, "/gradio_api/info?x=" + "y" * 70_000):
        status, text = get_raw(launched_app, path)
        assert status == 414 and text.startswith("SpecLab: this address is too long") and text.count("\n") == 1
    assert_clean_log(capfd, caplog)


def test_the_log_check_sees_a_real_traceback(launched_app, capfd):
    """The negative control of assert_clean_log: an input list too short for the endpoint makes Gradio itself
    fail, and that traceback does reach the captured log."""
    capfd.readouterr()
    try:
        call_raw(launched_app, [PROMPT])
    except AssertionError:
        pass
    out, err = capfd.readouterr()
    assert "Traceback" in out + err


@pytest.mark.slow
@pytest.mark.parametrize("seed", ["9007199254740993", 2**63 - 1])
def test_large_seeds_run_exactly(launched_app, random_engine, seed):
    """Seeds never pass through a float: 2**53 + 1 (as text, as the page's seed box sends it) runs as itself,
    and so does the largest, 2**63 - 1."""
    from gradio_client import Client

    status, lane = run(Client(launched_app, verbose=False), seed=seed, temperature=1.0, methods=["baseline"])[:2]
    assert "done" in status

    def text(s: int) -> str:
        config = GenerationConfig(method="baseline", max_new_tokens=24, temperature=1.0, seed=s)
        return random_engine.generate(PROMPT, config).text

    assert output_text_of(lane) == display_text(text(int(seed)))
    assert text(int(seed)) != text(int(seed) - 1)  # the check can tell neighbouring seeds apart


def test_a_full_queue_is_told_in_the_apps_words_with_the_wait(launched, monkeypatch, capfd, caplog):
    """Gradio refuses a run past the queue's size with HTTP 503 and its own text, which the page replaces with a
    fixed sentence; the app answers 429 (whose words the page shows), with the expected wait and a Retry-After."""
    import httpx

    demo, url = launched
    monkeypatch.setattr(demo._queue, "max_size", 0)  # every run finds the queue full
    capfd.readouterr()
    run_fn = next(fn for fn in demo.fns.values() if fn.api_name == "run")
    body = {"data": raw_inputs(), "fn_index": run_fn._id, "session_hash": "fullqueue", "event_data": None,
            "trigger_id": None}
    answer = httpx.post(url + "gradio_api/queue/join", json=body, timeout=30)
    assert answer.status_code == 429 and int(answer.headers["retry-after"]) >= 1
    assert re.fullmatch(r"SpecLab is busy: every place in the queue of runs is taken, and the runs waiting need "
                        r"about \d+ (s|minutes); please try again then\.", answer.json()["detail"])
    assert answer.json()["error"] == answer.json()["detail"]
    assert_clean_log(capfd, caplog)


def test_opening_the_page_takes_no_place_in_the_queue(random_engine):
    """Every server-side event a page runs as it opens (a link's settings, a recorded run, its download, a lesson
    point) is answered outside the queue: a class opening one link never fills it nor waits behind runs."""
    demo = build_app(random_engine)
    fns = list(demo.fns.values())
    opening = [fn for fn in fns if fn.fn is not None and any(t[1] == "load" for t in fn.targets)]
    while (after := [fn for fn in fns if fn.fn is not None and fn.trigger_after in {o._id for o in opening}
                     and fn not in opening]):
        opening += after
    assert len(opening) >= 3 and [fn.name for fn in opening if fn.queue is not False] == []


def test_the_page_is_built_once_and_served_from_memory(launched, monkeypatch):
    """Gradio builds the page afresh for every load; the served app builds it once per address (a new Host here)
    and answers every later load, whatever its link, with the same bytes Gradio built."""
    import gradio.routes

    demo, url = launched
    built = []
    real = gradio.routes.templates.TemplateResponse
    monkeypatch.setattr(gradio.routes.templates, "TemplateResponse", lambda *a, **k: built.append(1) or real(*a, **k))
    host = {"host": "class.example:7860"}
    pages = [httpx_get(url + path, host) for path in ("?lesson=3", "?prompt=x", "")]
    assert len(built) == 1 and pages[0] == pages[1] == pages[2]
    assert httpx_get(url + "?page=", host) == pages[0]  # Gradio's own answer (a query Gradio reads is never cached)
    assert len(built) == 2 and "class.example" in pages[0]


def httpx_get(url: str, headers: dict) -> str:
    import httpx

    answer = httpx.get(url, headers=headers, timeout=30)
    assert answer.status_code == 200
    return answer.text


def test_one_address_past_its_limit_is_slowed_and_others_are_not(launched, monkeypatch):
    """Requests that bypass the queue are limited per client address: the address the HTTP server resolved,
    from X-Forwarded-For when the connection comes from a trusted proxy (the loopback, here). The served app's
    limit gets a stopped clock, so no bucket refills while the test runs."""
    import http.client
    from urllib.parse import urlsplit

    from app.hosting.addresses import TokenBuckets, VisitorLimit

    demo, url = launched
    layer = demo.server_app.middleware_stack
    while not isinstance(layer, VisitorLimit):
        layer = layer.app
    monkeypatch.setattr(layer, "buckets", TokenBuckets(burst=5, rate=0.5, clock=lambda: 0.0))
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def get(visitor: str, path: str = "/theme.css") -> http.client.HTTPResponse:
        connection.request("GET", path, headers={"x-forwarded-for": visitor})
        answer = connection.getresponse()
        answer.read()
        return answer

    try:
        statuses = [get("198.51.100.7").status for _ in range(5)]
        refused = get("198.51.100.7")
        assert statuses == [200] * 5 and refused.status == 429 and refused.getheader("retry-after") == "2"
        assert get("198.51.100.8").status == 200  # another visitor
        assert get("198.51.100.7", "/assets/no-such-file.js").status == 404  # the frontend's files are not counted
    finally:
        connection.close()


# --- share links (pure) ----------------------------------------------------------------------------------

ALL_METHODS = ["baseline", "eagle3", "classic", "dflash", "dspark"]


def query_items(query: str) -> list[tuple[str, str]]:
    """The query as the server reads it (Starlette's parser, repeats kept), the way gr.Request hands it over."""
    from starlette.datastructures import QueryParams

    return list(QueryParams(query).multi_items())


@pytest.mark.parametrize("settings", [
    default_settings(ALL_METHODS),
    Settings(prompt="x = 'é ☃ 🎉' + \"a&b=c%20d+e#f?\"\n\tpass\n", methods=("baseline", "classic", "dspark"),
             temperature=0.35, seed=2**63 - 1, max_new_tokens=512, serial_k=1, drafts_per_block=16, verify_rule="match",
             scheduler="static", confidence_threshold=0.05, overlap="off"),
    Settings(prompt="  leading and trailing spaces  ", methods=("dflash",), temperature=5.0, seed=2**53 + 1,
             max_new_tokens=1, serial_k=16, drafts_per_block=1, scheduler="none", confidence_threshold=1.0, overlap="on"),
])
def test_a_link_reads_back_as_the_same_settings(settings):
    query = build_query(settings, preset="tiny")
    parsed, messages = parse_query(query_items(query), available=ALL_METHODS, preset="tiny")
    assert parsed == settings and messages == []


DEFAULTS = default_settings(ALL_METHODS)
TAMPERED = [  # (query, the control that falls back to its default)
    ("temperature=abc", "temperature"), ("temperature=nan", "temperature"), ("temperature=inf", "temperature"),
    ("temperature=-1", "temperature"), ("temperature=5.01", "temperature"), ("temperature=", "temperature"),
    ("seed=-1", "seed"), ("seed=1.5", "seed"), ("seed=nan", "seed"), ("seed=-inf", "seed"),
    (f"seed={2**63}", "seed"), ("seed=abc", "seed"), ("seed=" + "9" * 5000, "seed"), ("seed=0x10", "seed"),
    ("max_new_tokens=0", "max_new_tokens"), ("max_new_tokens=513", "max_new_tokens"),
    ("max_new_tokens=1e9", "max_new_tokens"), ("draft_len=0", "serial_k"), ("draft_len=17", "serial_k"),
    ("block_len=x", "drafts_per_block"), ("verify_rule=sometimes", "verify_rule"), ("verify_rule=REJECTION", "verify_rule"),
    ("scheduler=often", "scheduler"), ("confidence_threshold=2", "confidence_threshold"),
    ("confidence_threshold=NaN", "confidence_threshold"), ("overlap=maybe", "overlap"),
    ("methods=bogus", "methods"), ("methods=eagle3,ar", "methods"), ("methods=", "methods"), ("methods=,,", "methods"),
    ("methods=baseline,../../etc", "methods"), ("prompt=" + "x" * (MAX_PROMPT_CHARS + 1), "prompt"),
    ("prompt=", "prompt"), ("prompt=%20%0A", "prompt"), ("seed=1&seed=2", "seed"),
    ("prompt=a&prompt=b", "prompt"),
]


def test_the_method_id_ar_still_opens_as_eagle3_in_links_and_saved_files(random_engine):
    """EAGLE-3's lane was once called ar: links and comparison files that say so still open, as eagle3."""
    import json
    from dataclasses import asdict

    from app.comparison import Comparison, read_comparison

    parsed, messages = parse_query(query_items("methods=baseline,ar"), available=ALL_METHODS)
    assert (parsed.methods, messages) == (("baseline", "eagle3"), [])
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=6))
    saved = json.loads(Comparison.of_steps({**asdict(DEFAULTS), "methods": ["eagle3"]},
                                           {"eagle3": [result.prefill, *result.steps]}).to_json())
    old = {**saved, "settings": {**saved["settings"], "methods": ["ar"]},
           **{key: {"ar" if m == "eagle3" else m: v for m, v in saved[key].items()}
              for key in ("lanes", "drafters", "timing_runs", "run_rates") if isinstance(saved.get(key), dict)}}
    assert "ar" in old["lanes"] and "eagle3" not in old["lanes"]
    opened = read_comparison(json.dumps(old))
    assert list(opened.lanes) == ["eagle3"] and opened.settings["methods"] == ["eagle3"]
    assert opened.lanes["eagle3"].summary == read_comparison(json.dumps(saved)).lanes["eagle3"].summary


def test_links_and_files_name_the_draft_lengths_as_the_cli_does():
    """The controls are serial_k and drafts_per_block; links keep the CLI's draft_len and block_len, both ways."""
    parsed, messages = parse_query(query_items("draft_len=5&block_len=3"), available=ALL_METHODS)
    assert (parsed.serial_k, parsed.drafts_per_block, messages) == (5, 3, [])
    query = build_query(parsed)
    assert "draft_len=5" in query and "block_len=3" in query and "serial_k" not in query
    _, messages = parse_query(query_items("serial_k=5"), available=ALL_METHODS)
    assert messages == ["unknown link parameter 'serial_k' ignored"]  # one name per link parameter


@pytest.mark.parametrize("query, name", TAMPERED, ids=[q[:40] for q, _ in TAMPERED])
def test_a_tampered_link_gives_one_message_and_the_default(query, name):
    parsed, messages = parse_query(query_items(f"temperature=0.7&{query}" if name != "temperature" else query),
                                   available=ALL_METHODS, preset="tiny")
    assert len(messages) == 1, messages
    assert len(messages[0]) < 200  # one readable line, never the value itself at length
    assert getattr(parsed, name) == getattr(DEFAULTS, name)
    if name != "temperature":
        assert parsed.temperature == 0.7  # the rest of the link is still used


def test_a_link_names_what_this_server_cannot_do():
    parsed, messages = parse_query(query_items("methods=baseline,classic"), available=["baseline", "eagle3"])
    assert messages == ["this server has no classic lane; it runs baseline, eagle3; using the default"]
    assert parsed.methods == ("baseline", "eagle3")
    parsed, messages = parse_query(query_items("foo=1&__theme=dark&view=api&seed=5"), available=ALL_METHODS)
    assert messages == ["unknown link parameter 'foo' ignored"] and parsed.seed == 5  # Gradio's own are ignored
    parsed, messages = parse_query(query_items("preset=qwen3-4b&seed=5"), available=ALL_METHODS, preset="tiny")
    assert len(messages) == 1 and "this server runs preset tiny" in messages[0] and parsed.seed == 5
    _, messages = parse_query(query_items("&".join(f"p{i}=1" for i in range(500))), available=ALL_METHODS)
    assert len(messages) <= 12 and messages[-1].startswith("and ")


def test_controls_accept_text_and_refuse_anything_else():
    raw = dict(prompt=PROMPT, methods=["dspark", "baseline"], temperature="0.5", seed="9007199254740993",
               max_new_tokens=24.0, serial_k="4", drafts_per_block=7, verify_rule="match", scheduler="static",
               confidence_threshold=0.25, overlap="off")
    settings = parse_controls(raw, ALL_METHODS)
    assert settings.seed == 2**53 + 1 and settings.methods == ("baseline", "dspark")
    assert settings.temperature == 0.5 and settings.max_new_tokens == 24 and settings.serial_k == 4
    for name in ("seed", "temperature", "max_new_tokens", "serial_k", "confidence_threshold"):
        for value in ("abc", None, [], {}, True, math.nan, math.inf, -math.inf, "1e400", 10**400):
            with pytest.raises(SettingError):
                parse_controls({**raw, name: value}, ALL_METHODS)
    with pytest.raises(SettingError, match="too large to be exact as a float; send it as text, in digits"):
        parse_controls({**raw, "seed": float(2**53)}, ALL_METHODS)  # it may have been 2**53 + 1
    with pytest.raises(SettingError, match="seed '1e18' is too large to be exact as a float; write it in digits$"):
        parse_controls({**raw, "seed": "1e18"}, ALL_METHODS)  # text already: the digits are what is missing
    assert repair_text("a\ud800b\udfff") == "a\ufffdb\ufffd" and repair_text("\udcc3\udca9") == "é"
    assert repair_text("\udcff\ud83d") == "\ufffd\ufffd" and repair_text("é ☃ 🎉") == "é ☃ 🎉"


def test_a_temperature_too_low_to_sample_is_refused_in_one_line(random_engine):
    """Past about 1e-30, logits / temperature overflows and the sampler meets NaN probabilities; every positive
    temperature below MIN_SAMPLING_TEMPERATURE is refused where settings enter: the controls, a link, the engine."""
    raw = dict(default_settings(ALL_METHODS).__dict__, methods=["baseline"])
    for value in (1e-30, "1e-300", 5e-324, MIN_SAMPLING_TEMPERATURE / 2):
        with pytest.raises(SettingError, match="too low to sample with: use 0 for greedy decoding, or at least"):
            parse_controls({**raw, "temperature": value}, ALL_METHODS)
        with pytest.raises(EngineError, match="too low to sample"):
            GenerationConfig(method="eagle3", temperature=float(value)).validate()
    parsed, messages = parse_query(query_items("temperature=1e-40"), available=ALL_METHODS)
    assert parsed.temperature == DEFAULTS.temperature and "too low to sample" in messages[0]
    assert parse_controls({**raw, "temperature": 0}, ALL_METHODS).temperature == 0
    for method in ("baseline", "eagle3", "dspark"):  # the lowest temperature allowed samples with finite numbers
        config = GenerationConfig(method=method, temperature=MIN_SAMPLING_TEMPERATURE, max_new_tokens=12, seed=3)
        result = random_engine.generate(PROMPT, config)
        numbers = [x for s in result.steps for t in s.drafted for x in (t.draft_prob, t.target_prob, t.accept_prob)]
        assert result.output_ids and all(math.isfinite(x) for x in numbers if x is not None)


def test_small_charts_show_measured_values(random_engine):
    from app.draw.charts import acceptance_figure, progress_figure, survival_figure
    from engine.contract.summary import per_position_acceptance

    config = GenerationConfig(method="dspark", max_new_tokens=30, drafts_per_step=7, scheduler="static")
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    progress = progress_figure({"dspark": steps})
    assert progress.data[0].y[-1] == len(result.output_ids)
    acceptance = acceptance_figure({"dspark": per_position_acceptance(steps)})
    assert list(acceptance.data[0].y) == list(per_position_acceptance(steps))
    survival = survival_figure(steps)
    predicted, realised = survival.data
    assert all(0.0 <= v <= 1.0 for v in (*predicted.y, *realised.y))
    first = [s for s in result.steps if s.num_verified >= 1]
    assert realised.y[0] == pytest.approx(sum(s.num_accepted >= 1 for s in first) / len(first))
    assert predicted.y[0] == pytest.approx(sum(s.drafted[0].confidence for s in first) / len(first))


@pytest.mark.slow
def test_two_users_at_once_both_finish(launched_app, random_engine):
    """Runs queue one at a time (concurrency limit 1), so a second user waits instead of breaking the first."""
    import threading

    from gradio_client import Client

    results = {}

    def user(name: str, max_new: int):
        client = Client(launched_app, verbose=False)
        results[name] = run(client, max_new_tokens=max_new)

    threads = [threading.Thread(target=user, args=(f"user{i}", 16 + 8 * i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    expected = {name: random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=n)).text
                for name, n in (("user0", 16), ("user1", 24))}
    for name, outputs in results.items():
        assert "done" in outputs[0]
        assert output_text_of(outputs[1]) == display_text(expected[name])
    assert len(results) == 2


@pytest.mark.slow
def test_stop_ends_a_running_comparison(launched_app):
    import time

    from gradio_client import Client

    client = Client(launched_app, verbose=False)
    job = client.submit(**{**RUN, "max_new_tokens": 512}, api_name="/run")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("running" in str(out[0]) for out in job.outputs()):
        time.sleep(0.05)
    client.predict(api_name="/stop")  # same client, same session: stops this run only
    status, *lanes = job.result(timeout=120)[:-NUM_CHARTS]
    assert "stopped" in status
    assert any('data-state="stopped"' in lane for lane in lanes), [l[:300] for l in lanes]


def run_args() -> list:
    """RUN's values in the order the Run button's handler takes them."""
    return [RUN[k] for k in ("prompt", "methods", "temperature", "serial_k", "drafts_per_block", "max_new_tokens", "seed",
                             "verify_rule", "show_drafts", "scheduler", "confidence_threshold", "overlap")]


def _handler(demo, name: str):
    """The event handler of the built page with this function name (called directly, no server)."""
    return next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == name)


def test_stop_withdraws_a_run_still_waiting_in_the_queue(random_engine):
    from types import SimpleNamespace

    demo = build_app(random_engine)
    requested, stop, on_run = (_handler(demo, n) for n in ("on_requested", "on_stop", "on_run"))
    args = run_args()
    waiting = SimpleNamespace(session_hash="waiting-visitor")
    requested(waiting)  # pressed Run; the run waits in the queue
    stop(waiting)  # pressed Stop before it started
    outputs = list(on_run(*args, request=waiting))
    assert len(outputs) == 1 and "withdrawn" in outputs[0][0]

    # Stop pressed with nothing queued does not withdraw the next run; nor does a Stop from before the Run.
    idle = SimpleNamespace(session_hash="idle-visitor")
    stop(idle)
    requested(idle)
    assert "done" in list(on_run(*args, request=idle))[-1][0]
    requested(idle)
    assert "done" in list(on_run(*args, request=idle))[-1][0]


def test_a_running_lane_is_drawn_light_and_whole_once_it_ends(random_engine):
    steps = list(random_engine.stream(PROMPT, GenerationConfig(method="dspark", max_new_tokens=24)))
    full = lane_html(lane_of("dspark", steps), "dspark")
    live = lane_html(lane_of("dspark", steps, "running"), "dspark", live=True)
    tokens = r'<span class="tok ([^"]*)"( data-out)?( title="[^"]*")?>(.*?)</span>'
    output = full.split("<details")[0]  # the output, not the list of steps below it
    full_tokens, live_tokens = re.findall(tokens, output, flags=re.S), re.findall(tokens, live, flags=re.S)
    assert [(c, o, t) for c, o, _, t in full_tokens] == [(c, o, t) for c, o, _, t in live_tokens]  # same tokens
    assert all(title for *_, title, _ in full_tokens) and not any(title for *_, title, _ in live_tokens)
    assert "<details" in full and "<details" not in live  # the list of steps comes with the full view only
    assert len(live) < len(full) / 2
    # While it runs, each redraw only appends to the last one (so only the new tokens travel).
    earlier = lane_html(lane_of("dspark", steps[:3], "running"), "dspark", live=True)
    assert live.startswith(earlier) and len(live) > len(earlier)


def test_a_comparison_past_the_time_limit_is_stopped_with_a_clear_line(random_engine):
    from types import SimpleNamespace

    demo = build_app(random_engine, max_run_s=0.0)  # every comparison is out of time at once
    on_run = _handler(demo, "on_run")
    args = run_args()
    status, *lanes = list(on_run(*args, request=SimpleNamespace(session_hash="slow-visitor")))[-1][:-NUM_CHARTS]
    assert "stopped after 0 s" in status and "status-error" in status
    shown = [lane for lane in lanes if isinstance(lane, str) and 'data-state="stopped"' in lane]
    assert len(shown) == len(RUN["methods"])


def test_live_updates_send_values_never_gradio_updates(random_engine):
    """Every gr.skip() / gr.update() a handler returns adds a component to the session's state in Gradio 6,
    for good: the run's updates must be plain values (the server's memory grew ~0.4 MiB a run before)."""
    from types import SimpleNamespace

    demo = build_app(random_engine)
    outputs = list(_handler(demo, "on_run")(*run_args(), request=SimpleNamespace(session_hash="soak-visitor")))
    assert len(outputs) > 1 and "done" in outputs[-1][0]
    for values in outputs:
        assert not any(isinstance(v, dict) and v.get("__type__") == "update" for v in values)


def test_a_method_registered_at_run_time_appears_in_the_lanes_the_bench_and_the_about_text(tokenizer, monkeypatch):
    """Adding a method is one registry entry: no other file names it, yet it runs as a lane, in the bench and
    in the About text."""
    from types import SimpleNamespace

    import torch

    from app.tabs.about import methods_text
    from conftest import noisy_copy, tiny_qwen3
    from engine.measure.bench import run_bench
    from engine.loop import Engine
    from engine.contract.methods import METHOD_REGISTRY, Method

    echo = Method("echo", "Echo", "a test-only small LM drafting 2 tokens a step", 2, False, ("small-lm",),
                  about="a method that exists only in this test.")
    monkeypatch.setitem(METHOD_REGISTRY, "echo", echo)
    target = tiny_qwen3(len(tokenizer))
    engine = Engine(target, tokenizer, {"echo": noisy_copy(target, noise=0.05)}, torch.device("cpu"), preset="random")
    assert engine.methods() == ["baseline", "echo"]

    on_run = _handler(build_app(engine), "on_run")
    args = run_args()
    args[1], args[5] = ["baseline", "echo"], 8  # the lanes, max new tokens
    status, *lanes = list(on_run(*args, request=SimpleNamespace(session_hash="echo-visitor")))[-1][:-NUM_CHARTS]
    assert "done" in status
    (echo_lane,) = [lane for lane in lanes if 'data-method="echo"' in lane]
    assert "Echo" in echo_lane and echo.description in echo_lane and "speedup" in echo_lane

    report = run_bench(engine, [PROMPT], max_new_tokens=8, serial_k=2, with_hf=False)
    assert set(report["lanes"]) == {"baseline", "echo"} and report["identical_outputs"]
    assert "**Echo**: a method that exists only in this test." in methods_text()


def test_a_method_whose_drafter_has_no_weights_is_one_module_and_one_registry_entry(tokenizer, monkeypatch):
    """tests/toy_drafter.py and the two entries below are all it takes: no preset, no checkpoint, no weight digest;
    every engine builds it, and it runs as a lane, in the bench and in the About text, equal to the baseline."""
    from types import SimpleNamespace

    import torch

    from app.tabs.about import methods_text
    from conftest import tiny_qwen3
    from engine.contract.methods import DRAFTER_KINDS, METHOD_REGISTRY, DrafterKind, Method
    from engine.loop import Engine
    from engine.measure.bench import run_bench

    monkeypatch.setitem(DRAFTER_KINDS, "repeat", DrafterKind("repeat", "repeater", "toy_drafter", weights=False))
    monkeypatch.setitem(METHOD_REGISTRY, "repeat", Method("repeat", "Repeat", "proposes its last token again", 3,
                                                          False, ("repeat",), about="a drafter with no weights."))
    engine = Engine(tiny_qwen3(len(tokenizer)), tokenizer, {}, torch.device("cpu"), preset="random")
    assert engine.methods() == ["baseline", "repeat"]

    args = run_args()
    args[1], args[5] = ["baseline", "repeat"], 8  # the lanes, max new tokens
    status, *lanes = list(_handler(build_app(engine), "on_run")(*args, request=SimpleNamespace(session_hash="toy"))
                          )[-1][:-NUM_CHARTS]
    assert "done" in status
    (lane,) = [lane for lane in lanes if 'data-method="repeat"' in lane]
    assert "Repeat" in lane and "repeat the last token" in lane and "identical to the baseline" in lane

    report = run_bench(engine, [PROMPT], max_new_tokens=8, serial_k=3, with_hf=False)
    assert set(report["lanes"]) == {"baseline", "repeat"} and report["identical_outputs"]
    assert "**Repeat**: a drafter with no weights." in methods_text()


def test_copy_link_cautions_past_a_proxys_limit_and_refuses_past_the_servers(random_engine):
    from app.tabs.compare import LONG_LINK_CHARS, MAX_LINK_CHARS

    make_link = _handler(build_app(random_engine), "make_link")
    values = {**RUN, "seed": "0"}
    controls = [values[k] for k in ("prompt", "methods", "temperature", "seed", "max_new_tokens", "serial_k",
                                    "drafts_per_block", "verify_rule", "scheduler", "confidence_threshold", "overlap")]

    def link(prompt: str):
        return make_link("http://127.0.0.1:7860/", prompt, *controls[1:])

    shown, notes = link(PROMPT)
    assert shown["visible"] and shown["value"].startswith("http://127.0.0.1:7860/?") and not notes["visible"]
    shown, notes = link("x" * (LONG_LINK_CHARS + 100))
    assert shown["visible"] and "Note on this link" in notes["value"]
    shown, notes = link("x" * (MAX_LINK_CHARS + 100))
    assert not shown["visible"] and "No link made" in notes["value"] and "Download this comparison" in notes["value"]


def test_a_block_longer_than_the_drafter_was_trained_on_is_said_and_recorded_as_what_ran(random_engine):
    from types import SimpleNamespace

    cap = random_engine.max_drafts("dflash")
    assert cap is not None and cap < 16
    result = random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=8, drafts_per_step=16))
    assert result.config.drafts_per_step == cap  # the CLI's JSON records what ran
    args = run_args()
    args[1], args[4], args[5] = ["baseline", "dflash"], 16, 8  # lanes, block length, max new tokens
    status = list(_handler(build_app(random_engine), "on_run")(*args, request=SimpleNamespace(session_hash="cap")))[-1][0]
    assert f"DFlash drafted {cap} per step (its trained block), not 16" in status and "Baseline drafted" not in status


def test_the_block_control_stops_at_what_the_loaded_drafters_can_draft(random_engine):
    """The block slider's top is the longest block a loaded one-pass drafter was trained on, and it says so."""
    demo = build_app(random_engine)
    slider = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "drafts-per-block")
    most = max(random_engine.max_drafts(m) for m in ("dflash", "dspark"))
    assert slider.maximum == most and f"up to {most}" in slider.label
    assert slider.value <= most
