"""Shared fixtures: tiny random Qwen3 models on the real tokenizer, so every test runs in seconds on a CPU.

The drafter is a noisy copy of the target: close enough that some drafts are accepted and some rejected,
which exercises every branch of verification and cache rollback.
"""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import gc
from contextlib import contextmanager
import os
import queue
import threading
from pathlib import Path

import pytest
import torch

from scripts.support import CHROMIUM, NEAR_CHARTS_WAITING_JS, free_port, launch_chromium

# One torch thread, as the app's tiny preset runs: models this small gain nothing from a second one, and on a
# busy machine two threads wait on each other at every operator (the bench test took 77 s with two while a
# training job held the cores, 1.5 s with one).
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
TINY_CONTEXT = 96


def tiny_qwen3(vocab_size: int, layers: int = 2, hidden: int = 64, context: int = TINY_CONTEXT, seed: int = 0):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=hidden // 4, max_position_embeddings=context, tie_word_embeddings=True,
                         initializer_range=0.3, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return Qwen3ForCausalLM(config).eval().requires_grad_(False)


def noisy_copy(model, noise: float, seed: int = 1):
    other = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * noise * p.std())
    return other


def decoder_layer_weights(prefix: str, hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int,
                          generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Random weights of one Qwen3-style draft layer, named as the public DFlash / DSpark checkpoints name them."""
    return {
        prefix + "self_attn.q_proj.weight": torch.randn(heads * head_dim, hidden, generator=generator),
        prefix + "self_attn.k_proj.weight": torch.randn(kv_heads * head_dim, hidden, generator=generator),
        prefix + "self_attn.v_proj.weight": torch.randn(kv_heads * head_dim, hidden, generator=generator),
        prefix + "self_attn.o_proj.weight": torch.randn(hidden, heads * head_dim, generator=generator),
        prefix + "self_attn.q_norm.weight": torch.ones(head_dim), prefix + "self_attn.k_norm.weight": torch.ones(head_dim),
        prefix + "mlp.gate_proj.weight": torch.randn(inter, hidden, generator=generator),
        prefix + "mlp.up_proj.weight": torch.randn(inter, hidden, generator=generator),
        prefix + "mlp.down_proj.weight": torch.randn(hidden, inter, generator=generator),
        prefix + "input_layernorm.weight": torch.ones(hidden),
        prefix + "post_attention_layernorm.weight": torch.ones(hidden),
    }


needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

# How often (ms) a browser test's wait_for_function reads the page: playwright's default reads it at every frame,
# sixty times a second, each read of sizes forcing the page's style and layout while it draws (chromium's CPU)
POLL_MS = 100

# True once the outlined chart has been outlined for `ms`: past the page's late re-scrolls (app/draw/projector.py
# speclabFocus scrolls again 400 and 1200 ms after it outlines the chart), timed from the outline, not from the test
OUTLINED_FOR_JS = """([id, ms]) => { const chart = document.getElementById(id);
  if (!chart || !chart.classList.contains('lesson-target')) return false;
  window.speclabOutlinedAt = window.speclabOutlinedAt || {};
  const since = window.speclabOutlinedAt[id] = window.speclabOutlinedAt[id] || performance.now();
  return performance.now() - since >= ms; }"""
SETTLED_MS = 1300


def no_near_chart_waits(page, timeout_ms: int = 5_000) -> None:
    """Wait until no chart near the view waits undrawn (scripts/support.py NEAR_CHARTS_WAITING_JS: the page draws one a
    frame after it comes near); fails if one still waits after timeout_ms."""
    page.wait_for_function(f"() => ({NEAR_CHARTS_WAITING_JS})().length === 0", timeout=timeout_ms, polling=POLL_MS)


# A drawn plotly chart's text as the browser laid it out: the frame of its svg, and every non-empty text element
# (titles, ticks, legend entries, bar labels, annotations) with its box and font size, in page pixels
CHART_TEXT_JS = """(root) => {
  const box = (r) => ({x: r.left, y: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height});
  const svg = root.querySelector(".main-svg");
  const texts = [...root.querySelectorAll(".main-svg text")].filter(t => t.textContent.trim()).map(t => ({
    text: t.textContent.trim(), size: parseFloat(getComputedStyle(t).fontSize), ...box(t.getBoundingClientRect())}))
    .filter(t => t.width > 0 && t.height > 0);
  return {frame: box(svg.getBoundingClientRect()), texts};
}"""


def chart_text_problems(chart: dict, min_size: float = 0, slack: float = 1.0) -> list[str]:
    """What a room could not read in a chart read by CHART_TEXT_JS: text outside its svg (cut), text boxes that
    overlap one another (by more than `slack` pixels each way), text under `min_size` pixels."""
    frame, texts, problems = chart["frame"], chart["texts"], []
    for t in texts:
        if (t["x"] < frame["x"] - slack or t["right"] > frame["right"] + slack or t["y"] < frame["y"] - slack
                or t["bottom"] > frame["bottom"] + slack):
            problems.append(f"{t['text']!r} outside the chart")
        if t["size"] < min_size:
            problems.append(f"{t['text']!r} at {t['size']} px")
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            wide = min(a["right"], b["right"]) - max(a["x"], b["x"])
            tall = min(a["bottom"], b["bottom"]) - max(a["y"], b["y"])
            if wide > slack and tall > slack:
                problems.append(f"{a['text']!r} overlaps {b['text']!r}")
    return problems


def launch_locally(demo):
    """Serve a built app on a free loopback port in this process; returns its URL. The port is free when picked;
    another test process (scripts/test.sh runs two) may take it before the server binds it, so a few tries."""
    from app.main import launch

    for attempt in range(3):
        port = free_port()
        try:
            launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
            return f"http://127.0.0.1:{port}/"
        except OSError:
            if attempt == 2:
                raise


@contextmanager
def app_served(engine, **app_settings):
    """The app over `engine` (build_app's keywords) served on loopback: its address; closed after."""
    from app.main import build_app

    demo = build_app(engine, **app_settings)
    try:
        yield launch_locally(demo)
    finally:
        demo.close()


@pytest.fixture(scope="session")
def random_app(random_engine):
    """The address of the app over `random_engine` with build_app's defaults, served on loopback once per test
    process (closed at its end): the browser tests that need no other settings open pages of their own on it
    (page_on), so no cookie, storage or visitor state carries over from one test to the next."""
    pytest.importorskip("gradio")
    from app.main import build_app

    demo = build_app(random_engine)
    yield launch_locally(demo)
    demo.close()


class ChromiumThread:
    """A headless chromium, driven through playwright's sync API from a thread of its own. While a sync playwright
    is open its thread's asyncio loop reads as running, so the tests' thread (some of whose tests call asyncio.run)
    never holds one; `browser` (a Remote) makes each call on this thread. One context of its own is kept for
    page_on: a page in it loads the app from the warm HTTP and code caches (about half the work of a fresh one)."""

    def __init__(self):
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        started: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._serve, args=(started,), name="chromium", daemon=True)
        self._thread.start()
        browser = started.result()
        self.browser = Remote(browser, self)
        self.context = Remote(self.call(browser.new_context), self)

    def _serve(self, started: concurrent.futures.Future) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                browser = launch_chromium(p)
                started.set_result(browser)
                while (call := self._calls.get()) is not None:
                    function, args, kwargs, done = call
                    try:
                        done.set_result(function(*args, **kwargs))
                    except BaseException as error:  # raised again in the calling thread
                        done.set_exception(error)
                browser.close()
        except BaseException as error:
            if not started.done():
                started.set_exception(error)
            raise

    def call(self, function, *args, **kwargs):
        if threading.current_thread() is self._thread:  # a page's event handler, already here
            return function(*args, **kwargs)
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((function, args, kwargs, done))
        return done.result()

    def close(self) -> None:
        self._calls.put(None)
        self._thread.join(30)


def _playwright_object(value) -> bool:
    from playwright._impl._sync_base import SyncBase

    return isinstance(value, SyncBase)


class Remote:
    """A playwright object (browser, context, page, locator, keyboard, ...) of a ChromiumThread: its methods and
    properties run on that thread; the playwright objects they return come back as Remotes too."""

    __slots__ = ("_target", "_thread")

    def __init__(self, target, thread: ChromiumThread):
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_thread", thread)

    def _wrap(self, value):
        if _playwright_object(value):
            return Remote(value, self._thread)
        return [self._wrap(v) for v in value] if isinstance(value, list) else value

    @staticmethod
    def _unwrap(value):
        if isinstance(value, Remote):
            return value._target
        if isinstance(value, (list, tuple)):
            return type(value)(Remote._unwrap(v) for v in value)
        return {k: Remote._unwrap(v) for k, v in value.items()} if isinstance(value, dict) else value

    def __getattr__(self, name: str):
        value = self._thread.call(getattr, self._target, name)
        if callable(value) and not _playwright_object(value):
            def method(*args, **kwargs):
                return self._wrap(self._thread.call(value, *self._unwrap(args), **self._unwrap(kwargs)))
            return method
        return self._wrap(value)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a Remote's {name} cannot be set")

    def __repr__(self) -> str:
        return f"Remote({self._target!r})"


_chromium_thread: list[ChromiumThread] = []


@pytest.fixture(scope="session")
def chromium():
    """One headless chromium for the test process (a launch costs a second or more), on a thread of its own
    (ChromiumThread), so it stays open across modules without a loop running on the tests' thread. Each test opens
    its pages with page_on; none carries cookies, storage or permissions from one test to the next."""
    pytest.importorskip("playwright.sync_api")
    _chromium_thread.append(ChromiumThread())
    yield _chromium_thread[0].browser
    _chromium_thread.pop().close()


CLEAR_STORAGE_JS = "() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }"


@contextmanager
def page_on(browser, **context_settings):
    """A page of `browser` (new_context's keywords: viewport, ...), closed after. On the process's chromium with no
    setting but the viewport, a new page in its kept context (warm caches); the context's cookies, permissions and
    the page's origin's storage are cleared after, so the next page starts as a fresh context's would."""
    kept = next((t for t in _chromium_thread if browser is t.browser), None)
    if kept is None or set(context_settings) - {"viewport"}:
        context = browser.new_context(**context_settings)
        try:
            yield context.new_page()
        finally:
            context.close()
        return
    page = kept.context.new_page()
    try:
        if "viewport" in context_settings:
            page.set_viewport_size(context_settings["viewport"])
        yield page
    finally:
        try:
            if page.url.startswith("http"):
                page.evaluate(CLEAR_STORAGE_JS)
        finally:
            page.close()
            kept.context.clear_cookies()
            kept.context.clear_permissions()


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ASSETS / "tokenizer")


def tiny_dflash(target, block_size: int = 8, layers: int = 1, seed: int = 2, target_features: bool = True):
    """A random DFlash drafter shaped for `target`, reading its layers 0 and 1 (target_features False: the
    ablation that reads none)."""
    from engine.drafters.dflash_model import DFlashDraftModel

    torch.manual_seed(seed)
    config = copy.deepcopy(target.config)
    config.num_hidden_layers, config.layer_types = layers, ["full_attention"] * layers
    config.dflash_config = {"target_layer_ids": [0, 1], "block_size": block_size, "mask_token_id": 1,
                            **({} if target_features else {"target_features": False})}
    return DFlashDraftModel(config).eval().requires_grad_(False)


EAGLE3_LAYER_IDS = [0, 1, 2, 3, 4]  # the layers a tiny EAGLE-3 drafter reads, of a 6-layer tiny target: never its last


def tiny_eagle3(target, layers: int = 1, seed: int = 4):
    """A random EAGLE-3 drafter shaped for a 6-layer `target`, its norms away from 1 (so a norm used in the wrong
    place shows)."""
    from engine.drafters.eagle3 import Eagle3DraftModel
    from engine.train.eagle3 import eagle3_config

    torch.manual_seed(seed)
    model = Eagle3DraftModel(eagle3_config(target.config, EAGLE3_LAYER_IDS, layers=layers)).eval().requires_grad_(False)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(seed)
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5, generator=generator)
    return model


def tiny_dspark(target, block_size: int = 7, layers: int = 1, rank: int = 8, seed: int = 3):
    """A random DSpark drafter shaped for `target`, with DeepSpec's top-level config fields."""
    from engine.drafters.dspark_model import DSparkDraftModel

    torch.manual_seed(seed)
    config = copy.deepcopy(target.config)
    config.num_hidden_layers, config.layer_types = layers, ["full_attention"] * layers
    config.update(dict(block_size=block_size, mask_token_id=1, target_layer_ids=[0, 1], markov_rank=rank,
                       markov_head_type="vanilla", enable_confidence_head=True, confidence_head_with_markov=True))
    model = DSparkDraftModel(config).eval().requires_grad_(False)
    with torch.no_grad():
        model.markov_head.markov_w1.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(seed))
        model.confidence_head.proj.weight.mul_(5)  # spread the confidences so the schedulers cut at many places
    return model


@functools.cache
def baseline_of(engine, prompt: str, max_new_tokens: int):
    """The engine's baseline run, made once per engine, prompt and length: at temperature 0 it is the same every
    time (tests/engine/test_identity.py test_baseline_is_the_same_run_after_run), and the identity tests hold many
    drafted runs against a few."""
    from engine.contract.types import GenerationConfig

    return engine.generate(prompt, GenerationConfig(method="baseline", max_new_tokens=max_new_tokens))


@pytest.fixture(scope="session")
def random_engine(tokenizer):
    from engine.loop import Engine

    target = tiny_qwen3(len(tokenizer))
    drafters = {"eagle3": noisy_copy(target, noise=0.05), "dflash": tiny_dflash(target), "dspark": tiny_dspark(target)}
    return Engine(target, tokenizer, drafters, torch.device("cpu"), preset="random")


# Test files that take longest (their tests' setup and call times summed from `pytest -n 2 --dist loadfile
# --no-loadscope-reorder --durations=0` on a quiet 2-core machine, 2026-12-06 in the afternoon: browser 40 s, slides 37,
# train 18, tree 16, identity 15, lesson 14, batch 14, trees_panel 12, servers 11, long_outputs 11, ...) run first:
# scripts/test.sh has pytest-xdist hand whole files to its two workers in collection order, so a long file collected
# last keeps one worker busy while the other waits (the drafter-registry test, 8 s with its subprocess, went last
# unlisted). Files not named here (each under 2 s) come after, in their own order. Order only; nothing is skipped.
# Ahead of them all, test_setup.py: it reads what its process has imported, so it runs first in its worker (the first
# file goes to the first worker), before a test pulls in modules the app never does (a plotly figure refusing a
# misspelt property imports every trace type to list the valid ones).
LONGEST_FIRST = ("test_setup.py", "test_browser.py", "test_slides.py", "test_train.py", "test_tree.py",
                 "test_identity.py", "test_lesson.py", "test_batch.py", "test_trees_panel.py", "test_servers.py",
                 "test_long_outputs.py", "test_compare.py", "test_queue_served.py", "test_space.py", "test_why.py",
                 "test_gpu_check.py", "test_engine_process.py", "test_live_sizes.py", "test_zerogpu.py",
                 "test_cli.py", "test_own_pair.py", "test_lesson_engine.py", "test_census.py", "test_target.py",
                 "test_recorded.py", "test_bench.py", "test_hostile_files.py", "test_load_speedup.py",
                 "test_lesson_live_marks.py", "test_engine.py", "test_page.py", "test_sampling.py",
                 "test_hostile_payloads.py", "test_stop.py", "test_formats.py", "test_toggles.py",
                 "test_method_registry.py", "test_provisional.py", "test_disk.py", "test_gpu_graphs.py",
                 "test_lesson_words.py")


def pytest_configure(config):
    """A test process holds a large heap for good (torch, transformers, gradio, models, served apps), and each full
    pass of Python's cyclic collector walks all of it: one full pass every 100 middle passes instead of every 10
    (what it saves: docs/benchmarks.md, the test suite). Explicit gc.collect() calls still collect everything."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


def pytest_collection_finish(session):
    """What the process holds once every test module is imported (torch, transformers, gradio, the tests' own
    modules) lives to its end: moved out of the cyclic collector's sight (gc.freeze), no pass walks it again, the
    last full pass at the process's end (pytest's check for unraisable exceptions) included."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its own order


@pytest.fixture(scope="session")
def embedded_engine():
    """The shipped models of the `tiny` preset, as a user gets them. Not warmed up here: the warm-up keeps first-call
    costs out of measured runs, and the tests time nothing; each test process would pay it (seconds) for nothing.
    It runs once, as a test of its own (tests/engine/test_identity.py)."""
    from engine.loop import Engine

    return Engine.load("tiny", "cpu")


@pytest.fixture(autouse=True, scope="session")
def measurements_kept_in_a_temporary_folder(tmp_path_factory):
    """What the engine measures once per machine and keeps (engine/scheduler.py stored_measurement) goes to a
    folder of this test run's own, never the user's cache; shared by the run's worker processes, so a measurement
    one of them made (seconds of timed forwards) is read by the other instead of made again."""
    saved = os.environ.get("SPECLAB_CACHE")
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "speclab-cache"
    folder.mkdir(exist_ok=True)
    os.environ["SPECLAB_CACHE"] = str(folder)
    yield
    if saved is None:
        os.environ.pop("SPECLAB_CACHE", None)
    else:
        os.environ["SPECLAB_CACHE"] = saved


@pytest.fixture(autouse=True, scope="session")
def verify_costs_timed_once():
    """DSpark's scheduler reads the verify's cost, timed once per engine (profile_verify_speed: 9 rounds of every
    size) and once per machine for batches (profile_batch_verify_speed: 5 rounds of 9 shapes over 128-token caches of
    up to 32 rows, seconds on the embedded models); the tests time nothing, so one round each, the batches' over
    32-token caches: the same code, the scheduler fed a rougher cost. Their own tests pass their sizes."""
    import engine.loop as loop
    import engine.speed as speed

    saved = speed.time_verifies, loop.profile_batch_verify_speed
    speed.time_verifies = functools.partial(speed.time_verifies, repeats=1)
    loop.profile_batch_verify_speed = functools.partial(loop.profile_batch_verify_speed, context=32, repeats=1)
    yield
    speed.time_verifies, loop.profile_batch_verify_speed = saved


@pytest.fixture(autouse=True, scope="session")
def no_settle_pause_between_lanes():
    """The app pauses 0.1 s before each lane so a browser on the same cores can draw (app/run/runner.py); the
    tests time nothing, and would pay it hundreds of times."""
    import app.run.runner as runner  # plain Python, no gradio: importable on the GPU machine too

    saved, runner.SETTLE_S = runner.SETTLE_S, 0.0
    yield
    runner.SETTLE_S = saved
