"""The Compare tab's handlers (app/tabs/compare.py), through gradio_client against the app served in this process
and called directly on a built page: a run draws the engine's own output in the lanes chosen; hostile input
(non-numbers, NaN, huge seeds, lone surrogates, markup) gets one clear line and never a traceback in the log;
Stop ends a run or withdraws a waiting one; a time limit stops a run; methods added at run time get a lane; the
block control and the copied link keep within what the server can do."""

from __future__ import annotations

import html
import math
import re

import pytest

gr = pytest.importorskip("gradio")

import compare_support  # noqa: E402
from app.main import build_app  # noqa: E402
from app.settings import MAX_PROMPT_CHARS, PARSERS, repair_text  # noqa: E402
from app.draw.render import display_text  # noqa: E402
from app.tabs.compare import NUM_CHARTS  # noqa: E402
from compare_support import (PROMPT, RUN, assert_clean_log, call_raw, output_text_of, raw_inputs,  # noqa: E402
                             run)
from engine.contract.types import GenerationConfig  # noqa: E402

launched, launched_app = compare_support.launched, compare_support.launched_app  # the app served for this file


@pytest.fixture(scope="module")
def built(launched):
    """The page of the app served for this file, for the tests that call its handlers directly (each as a visitor
    of its own): one build for the file, not one per test."""
    return launched[0]


@pytest.mark.slow
def test_run_handler_through_gradio_client(launched_app, random_engine):
    from gradio_client import Client

    client = Client(launched_app, verbose=False)
    status, *lanes = run(client, methods=random_engine.methods(), max_new_tokens=12)[:-NUM_CHARTS]  # less the charts
    assert "done" in status
    assert len(lanes) == len(random_engine.methods())
    expected = random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=12)).text
    for lane in lanes:  # greedy: every lane writes the baseline's text
        assert output_text_of(lane) == display_text(expected)
        assert 'data-state="done"' in lane


@pytest.mark.slow
def test_only_the_selected_lanes_run(launched_app, random_engine):
    from gradio_client import Client

    status, *lanes = run(Client(launched_app, verbose=False), methods=["dspark", "baseline"], max_new_tokens=8
                         )[:-NUM_CHARTS]
    assert "done" in status
    states = {m: re.search(r'data-state="([^"]*)"', lane).group(1) for m, lane in zip(random_engine.methods(), lanes)}
    assert states == {"baseline": "done", "eagle3": "not selected", "dflash": "not selected", "dspark": "done",
                      "dflash_tree": "not selected"}


@pytest.mark.slow
def test_a_run_among_other_requests_shows_its_own_trace_and_the_batchs_throughput(launched_app, random_engine):
    """Requests at once 4: each lane decodes the prompt among three held-out ones, writes the target's greedy text and
    says what the whole batch wrote per second, and the status says how it ran. (A tree lane's one line, that it
    runs alone: tests/engine/test_batch.py.)"""
    from gradio_client import Client

    status, *lanes = run(Client(launched_app, verbose=False), methods=["baseline", "dflash"], requests_at_once=4,
                         max_new_tokens=12)[:-NUM_CHARTS]
    shown = dict(zip(random_engine.methods(), lanes))
    expected = random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=12)).text
    for method in ("baseline", "dflash"):
        assert 'data-state="done"' in shown[method] and output_text_of(shown[method]) == display_text(expected)
        assert "batch tokens/s" in shown[method] and "the batch of 4" in shown[method]
    assert "done" in status and "among 4 requests at once" in status


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
    (dict(drafts_per_step_serial=40), "draft length K must be a whole number from 1 to 16"),
    (dict(drafts_per_step_one_pass="seven"), "tokens per block must be a whole number"),
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
    (dict(requests_at_once=0), "requests at once must be a whole number from 1 to 32"),
    (dict(requests_at_once="a server"), "requests at once must be a whole number from 1 to 32"),
]


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

    status, lane = run(Client(launched_app, verbose=False), seed=seed, temperature=1.0, methods=["baseline"],
                       max_new_tokens=12)[:2]
    assert "done" in status

    def text(s: int) -> str:
        config = GenerationConfig(method="baseline", max_new_tokens=12, temperature=1.0, seed=s)
        return random_engine.generate(PROMPT, config).text

    assert output_text_of(lane) == display_text(text(int(seed)))
    assert text(int(seed)) != text(int(seed) - 1)  # the check can tell neighbouring seeds apart


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
    return raw_inputs()


def _handler(demo, name: str):
    """The event handler of the built page with this function name (called directly, no server)."""
    return next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == name)


def test_stop_withdraws_a_run_still_waiting_in_the_queue(built):
    from types import SimpleNamespace

    demo = built
    requested, stop, on_run = (_handler(demo, n) for n in ("on_requested", "on_stop", "on_run"))
    args = raw_inputs(methods=["baseline", "dflash"], max_new_tokens=4)  # whether it runs, not what it writes
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


def test_a_comparison_past_the_time_limit_is_stopped_with_a_clear_line(random_engine):
    from types import SimpleNamespace

    demo = build_app(random_engine, max_run_s=0.0)  # every comparison is out of time at once
    on_run = _handler(demo, "on_run")
    args = raw_inputs(prompt="def out_of_time(x):\n")  # not the run just measured, which a run now would share
    status, *lanes = list(on_run(*args, request=SimpleNamespace(session_hash="slow-visitor")))[-1][:-NUM_CHARTS]
    assert "stopped after 0 s" in status and "status-error" in status
    shown = [lane for lane in lanes if isinstance(lane, str) and 'data-state="stopped"' in lane]
    assert len(shown) == len(RUN["methods"])


def test_live_updates_send_values_never_gradio_updates(built):
    """Every gr.skip() / gr.update() a handler returns adds a component to the session's state in Gradio 6,
    for good: the run's updates must be plain values (the server's memory grew ~0.4 MiB a run before)."""
    from types import SimpleNamespace

    outputs = list(_handler(built, "on_run")(*run_args(), request=SimpleNamespace(session_hash="soak-visitor")))
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

    report = run_bench(engine, [PROMPT], max_new_tokens=8, drafts_per_step={"serial": 2}, with_hf=False)
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

    report = run_bench(engine, [PROMPT], max_new_tokens=8, drafts_per_step={"serial": 3}, with_hf=False)
    assert set(report["lanes"]) == {"baseline", "repeat"} and report["identical_outputs"]
    assert "**Repeat**: a drafter with no weights." in methods_text()


def test_copy_link_cautions_past_a_proxys_limit_and_refuses_past_the_servers(built):
    from app.tabs.compare import LONG_LINK_CHARS, MAX_LINK_CHARS

    make_link = _handler(built, "make_link")
    values = {**RUN, "seed": "0"}
    controls = [values[k] for k in PARSERS]  # the Copy link button's inputs: every control, in PARSERS' order

    def link(prompt: str):
        return make_link("http://127.0.0.1:7860/", prompt, *controls[1:])

    shown, notes = link(PROMPT)
    assert shown["visible"] and shown["value"].startswith("http://127.0.0.1:7860/?") and not notes["visible"]
    shown, notes = link("x" * (LONG_LINK_CHARS + 100))
    assert shown["visible"] and "Note on this link" in notes["value"]
    shown, notes = link("x" * (MAX_LINK_CHARS + 100))
    assert not shown["visible"] and "No link made" in notes["value"] and "Download this comparison" in notes["value"]


def test_a_block_longer_than_the_drafter_was_trained_on_is_said_and_recorded_as_what_ran(random_engine, built):
    from types import SimpleNamespace

    cap = random_engine.max_drafts("dflash")
    assert cap is not None and cap < 16
    result = random_engine.generate(PROMPT, GenerationConfig(method="dflash", max_new_tokens=8, drafts_per_step=16))
    assert result.config.drafts_per_step == cap  # the CLI's JSON records what ran
    args = run_args()
    args[1], args[4], args[5] = ["baseline", "dflash"], 16, 8  # lanes, block length, max new tokens
    status = list(_handler(built, "on_run")(*args, request=SimpleNamespace(session_hash="cap")))[-1][0]
    assert f"DFlash drafted {cap} per step (its trained block), not 16" in status and "Baseline drafted" not in status


def test_the_block_control_stops_at_what_the_loaded_drafters_can_draft(random_engine, built):
    """The block slider's top is the longest block a loaded one-pass drafter was trained on, and it says so."""
    slider = next(b for b in built.blocks.values() if getattr(b, "elem_id", None) == "drafts-per-step-one-pass")
    most = max(random_engine.max_drafts(m) for m in ("dflash", "dspark"))
    assert slider.maximum == most and f"up to {most}" in slider.label
    assert slider.value <= most
