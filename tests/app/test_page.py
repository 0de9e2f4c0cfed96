"""The page as built and as served (app/main.py's build_app and launch, app/__main__.py, app/hosting): it builds
without launching and imports no torch, shows no emoji, falls back to the embedded models when a preset cannot run;
served, it keeps no copy of its configuration per visitor, answers an over-long address, a full queue and an
address past its limit in its own words, serves the page from memory, opens without taking a place in the queue,
and runs two users' comparisons one after the other."""

from __future__ import annotations

import re

import pytest

gr = pytest.importorskip("gradio")

import compare_support  # noqa: E402
from app.main import build_app  # noqa: E402
from app.draw.render import display_text  # noqa: E402
from compare_support import PROMPT, assert_clean_log, call_raw, output_text_of, raw_inputs, run  # noqa: E402
from engine.contract.types import GenerationConfig  # noqa: E402

launched, launched_app = compare_support.launched, compare_support.launched_app  # the app served for this file


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
    demo = compare_support.default_app(random_engine)  # build_app(random_engine), built once per test process
    assert isinstance(demo, gr.Blocks)
    labels = {getattr(block, "label", None) for block in demo.blocks.values()}
    assert {"Compare", "Why", "About"} <= labels
    lanes = {block.elem_id for block in demo.blocks.values() if str(getattr(block, "elem_id", "")).startswith("lane-")}
    assert lanes == {f"lane-{m}" for m in random_engine.methods()}  # one lane per method the engine can run
    selector = next(b for b in demo.blocks.values() if getattr(b, "label", None) == "Lanes")
    assert [value for _, value in selector.choices] == random_engine.methods()  # registry order
    assert selector.value == [m for m in ("baseline", "eagle3", "dflash", "dspark") if m in random_engine.methods()]


def test_the_queue_looks_for_work_at_the_apps_pace(random_engine):
    """Gradio's queue sleeps between looks for a job to start and for progress to send, reading the two intervals
    from its own attributes each time round; the app sets them (app/main.py), since Gradio's 1 and 10 ms keep an
    idle server busy polling. A Gradio that renamed them would make the setting silently do nothing."""
    import inspect

    from app.main import PROGRESS_POLL_S, QUEUE_POLL_S
    from gradio.queueing import Queue

    assert "await asyncio.sleep(self.sleep_when_free)" in inspect.getsource(Queue.start_processing)
    assert "await asyncio.sleep(self.progress_update_sleep_when_free)" in inspect.getsource(
        Queue.start_progress_updates)
    queue = compare_support.default_app(random_engine)._queue
    assert (queue.sleep_when_free, queue.progress_update_sleep_when_free) == (QUEUE_POLL_S, PROGRESS_POLL_S)
    assert 0.001 < QUEUE_POLL_S <= 0.05 and 0.01 < PROGRESS_POLL_S <= 0.2  # slower than Gradio's, quick for a click


# Emoji: Debian's chromium draws them from no installed font (DejaVu has none), so each shows as an empty box.
# The symbols the page uses (✂ ⚠ τ α ≤ × ◆ ★ → ⏎) are text glyphs DejaVu has.
BMP_EMOJI = set("⌚⌛⏩⏪⏫⏬⏰⏳◽◾☔☕♈♉♊♋♌♍♎♏♐♑♒♓♿⚓⚡⚪⚫⚽⚾⛄⛅⛎⛔⛪⛲⛳⛵⛺⛽✅✊✋✨❌❎❓❔❕❗➕➖➗➰➿⬛⬜⭐⭕")


def emoji_in(text: str) -> list[str]:
    """The emoji in `text`: the emoji planes, the emoji variation selector and joiner, and the text-plane
    characters drawn as emoji by default."""
    return [c for c in text if 0x1F000 <= ord(c) <= 0x1FAFF or c in "\ufe0f\u200d" or c in BMP_EMOJI]


def test_the_page_and_its_example_prompts_have_no_emoji(launched):
    import json

    from app.examples import example_prompts

    assert emoji_in("héllo 🚀 ✅ x") == ["🚀", "✅"] and emoji_in("✂ ⚠ τ α ≤ × ◆ ★ → ⏎ ◀ ▶") == []
    page = json.dumps(launched[0].config, ensure_ascii=False)  # every label, text, chart and style
    assert "Words used on these pages" in page  # the whole page, the About tab included
    assert emoji_in(page) == [] and emoji_in("".join(example_prompts())) == []


def test_the_app_calls_no_one(random_engine, monkeypatch):
    """Gradio's analytics are off: building the app starts no thread asking PyPI for Gradio's latest version, and its
    launch, which reads the same flag, reports to no server (the embedded models run on closed networks; a teaching
    page sends nothing away)."""
    import gradio.analytics

    asked = []
    monkeypatch.setattr(gradio.analytics, "version_check", lambda: asked.append("version check"))
    with gr.Blocks(analytics_enabled=True):  # what Gradio does by default: the check above can see it
        pass
    assert asked == ["version check"]
    asked.clear()
    demo = build_app(random_engine)
    assert demo.analytics_enabled is False and asked == []


def test_a_preset_that_cannot_run_falls_back_to_the_embedded_models(random_engine, monkeypatch, capsys):
    import app.__main__ as entry
    from engine.contract.types import EngineError

    asked = []

    def load_engine(preset, device, threads=None, own_process=True, cuda_graphs="auto"):
        asked.append(cuda_graphs)
        if preset != "tiny":
            raise EngineError(f"preset {preset!r} needs a CUDA GPU and there is none here")
        return random_engine

    served = {}
    monkeypatch.setattr(entry, "load_engine", load_engine)
    monkeypatch.setattr("app.main.launch", lambda demo, **kw: served.setdefault("demo", demo))
    assert entry.main(["--preset", "qwen3-4b", "--cuda-graphs", "off"]) == 0
    assert asked == ["off", "off"]  # the engine's CUDA graphs as asked, for the preset and the fallback alike
    notice = [b.value for b in served["demo"].blocks.values() if getattr(b, "elem_id", None) == "notice"]
    assert notice and "needs a CUDA GPU" in notice[0] and "embedded models (tiny)" in notice[0]
    assert "warning: preset 'qwen3-4b' needs a CUDA GPU" in capsys.readouterr().err


def test_new_visitors_cost_no_copy_of_the_page_configuration(launched, monkeypatch):
    """Gradio builds every block's configuration for each new session (for its deep links, which this page
    has not); the served app's sessions skip it, and a run through them still works (the other tests here)."""
    from gradio.blocks import BlocksConfig

    from app.run.page_sessions import LeanSessionState

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


def test_opening_the_page_takes_no_place_in_the_queue(launched):
    """Every server-side event a page runs as it opens (a link's settings, a recorded run, its download, a lesson
    point) is answered outside the queue: a class opening one link never fills it nor waits behind runs."""
    demo, _ = launched
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


@pytest.mark.slow
def test_two_users_at_once_both_finish(launched_app, random_engine):
    """Runs queue one at a time (concurrency limit 1), so a second user waits instead of breaking the first."""
    import threading

    from gradio_client import Client

    results = {}

    def user(name: str, max_new: int):
        client = Client(launched_app, verbose=False)
        results[name] = run(client, methods=["baseline", "dflash"], max_new_tokens=max_new)

    threads = [threading.Thread(target=user, args=(f"user{i}", 8 + 4 * i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    expected = {name: random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=n)).text
                for name, n in (("user0", 8), ("user1", 12))}
    for name, outputs in results.items():
        assert "done" in outputs[0]
        assert output_text_of(outputs[1]) == display_text(expected[name])
    assert len(results) == 2
