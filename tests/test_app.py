"""The app: it builds without launching, its run handler works through gradio_client against a locally
launched app, and what it draws matches the engine's own output."""

from __future__ import annotations

import html
import re

import pytest

gr = pytest.importorskip("gradio")

from app.charts import timeline_figure  # noqa: E402
from app.main import build_app  # noqa: E402
from app.render import display_text, lane_html  # noqa: E402
from engine.types import GenerationConfig  # noqa: E402

from conftest import launch_locally  # noqa: E402

PROMPT = "def parse(self, text):\n"


def output_text_of(lane: str) -> str:
    """The text of the tokens the lane marks as output, as a browser would show it."""
    spans = re.findall(r'<span class="tok [^"]*" data-out title="[^"]*">(.*?)</span>', lane, flags=re.S)
    return "".join(html.unescape(s) for s in spans)


def test_app_imports_no_torch():
    import ast
    from pathlib import Path

    for path in Path(__file__).resolve().parent.parent.joinpath("app").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in getattr(node, "names", [])}
        modules = {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert "torch" not in names | modules, path


def test_app_builds_without_launching(random_engine):
    demo = build_app(random_engine)
    assert isinstance(demo, gr.Blocks)
    labels = {getattr(block, "label", None) for block in demo.blocks.values()}
    assert {"Compare", "About"} <= labels
    lanes = {block.elem_id for block in demo.blocks.values() if str(getattr(block, "elem_id", "")).startswith("lane-")}
    assert lanes == {f"lane-{m}" for m in random_engine.methods()}  # one lane per method the engine can run


def test_a_preset_that_cannot_run_falls_back_to_the_embedded_models(random_engine, monkeypatch, capsys):
    import app.__main__ as entry
    from engine.types import EngineError

    def load_engine(preset, device):
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
    config = GenerationConfig(method="ar", max_new_tokens=30, draft_len=4)
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    lane = lane_html("ar", steps, PROMPT, "done", 30, random_engine.eos_id, greedy=True)
    assert output_text_of(lane) == display_text(result.text)
    assert lane.count('class="tok rejected ghost"') == sum(
        1 for s in result.steps for t in s.drafted if t.verdict == "rejected")
    assert "τ" in lane and "speedup" in lane


def test_timeline_has_one_row_per_lane_and_every_span(random_engine):
    runs = {m: random_engine.generate(PROMPT, GenerationConfig(method=m, max_new_tokens=12, draft_len=3))
            for m in ("baseline", "ar")}
    fig = timeline_figure({m: [r.prefill, *r.steps] for m, r in runs.items()})
    drawn = sum(len(trace.x) for trace in fig.data if trace.name != "bubble (gap)")
    assert drawn == sum(len(s.spans) for r in runs.values() for s in (r.prefill, *r.steps))
    draft = next(t for t in fig.data if t.name == "draft")
    assert set(draft.y) == {"AR"}
    assert all(x > 0 for trace in fig.data for x in trace.x)


@pytest.fixture(scope="module")
def launched_app(random_engine):
    demo = build_app(random_engine)
    yield launch_locally(demo)
    demo.close()


@pytest.mark.slow
def test_run_handler_through_gradio_client(launched_app, random_engine):
    from gradio_client import Client

    client = Client(launched_app, verbose=False)
    status, *lanes = client.predict(PROMPT, 0.0, 4, 7, 24, 0, "rejection", True, "throughput", 0.5, "auto",
                                    api_name="/run")[:-4]  # the last four outputs are the charts
    assert "done" in status
    assert len(lanes) == len(random_engine.methods())
    expected = random_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=24)).text
    for lane in lanes:  # greedy: every lane writes the baseline's text
        assert output_text_of(lane) == display_text(expected)
        assert 'data-state="done"' in lane


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("", 0.0, 4, 7, 24, 0, "rejection", True, "throughput", 0.5, "auto"), "prompt is empty"),
    (("x " * 200, 0.0, 4, 7, 24, 0, "rejection", True, "throughput", 0.5, "auto"), "context"),
    ((PROMPT, 0.0, 4, 7, 24, -3, "rejection", True, "throughput", 0.5, "auto"), "less than minimum"),
    ((PROMPT, 0.0, 40, 7, 24, 0, "rejection", True, "throughput", 0.5, "auto"), "greater than maximum value 16"),
    ((PROMPT, 0.0, 4, 7, 24, 0, "sometimes", True, "throughput", 0.5, "auto"), "sometimes"),
    ((PROMPT, 0.0, 4, 7, 24, 0, "rejection", True, "often", 0.5, "auto"), "often"),
])
def test_bad_input_gets_a_clear_message(launched_app, args, message):
    """Out-of-range input is refused either by Gradio's own bounds (an error toast) or by the engine's
    checks (a message in the status line); both name the problem."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    try:
        status = Client(launched_app, verbose=False).predict(*args, api_name="/run")[0]
    except AppError as exc:
        assert message in str(exc)
    else:
        assert "status-error" in status and message in status


def test_small_charts_show_measured_values(random_engine):
    from app.charts import acceptance_figure, progress_figure, survival_figure
    from engine.summary import per_position_acceptance

    config = GenerationConfig(method="dspark", max_new_tokens=30, draft_len=7, scheduler="static")
    result = random_engine.generate(PROMPT, config)
    steps = [result.prefill, *result.steps]
    progress = progress_figure({"dspark": steps})
    assert progress.data[0].y[-1] == len(result.output_ids)
    acceptance = acceptance_figure({"dspark": steps})
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
        results[name] = client.predict(PROMPT, 0.0, 4, 7, max_new, 0, "rejection", True, "throughput", 0.5, "auto",
                                       api_name="/run")

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
    job = client.submit(PROMPT, 0.0, 4, 7, 512, 0, "rejection", True, "throughput", 0.5, "auto", api_name="/run")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("running" in str(out[0]) for out in job.outputs()):
        time.sleep(0.05)
    client.predict(api_name="/stop")  # same client, same session: stops this run only
    status, *lanes = job.result(timeout=120)[:-4]
    assert "stopped" in status
    assert any('data-state="stopped"' in lane for lane in lanes), [l[:300] for l in lanes]
