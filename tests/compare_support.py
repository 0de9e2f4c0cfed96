"""What the app's tests share: the Compare tab's run inputs (PROMPT, RUN) and two ways to send them (through
gradio_client, and as raw JSON, as a hostile client can), the app served in the test's process, the check that the
server's log holds no traceback, the text a lane marks as output, and a share link's query as the server reads it.

Test files import it by name (`from compare_support import ...`: pytest puts a test file's folder on sys.path).
A file that uses the served app binds its fixtures by name, `launched = compare_support.launched` (an imported
fixture used as a test's argument reads as a redefinition to pyflakes)."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import pytest

from app.comparison import Comparison, settings_dict
from app.main import build_app
from app.settings import default_settings
from engine.contract.types import GenerationConfig
from conftest import launch_locally


PROMPT = "def parse(self, text):\n"
# Every input of the /run endpoint by name (the API takes keywords; tests change what they need).
RUN = dict(prompt=PROMPT, methods=["baseline", "eagle3", "dflash", "dspark"], temperature=0.0, drafts_per_step_serial=4,
           drafts_per_step_one_pass=7, max_new_tokens=24, seed=0, verify_rule="rejection", show_drafts=True, scheduler="throughput",
           confidence_threshold=0.5, overlap="auto", tree_nodes=16, requests_at_once=1)
# The methods a share link may name, and the settings a link falls back to.
ALL_METHODS = ["baseline", "eagle3", "classic", "dflash", "dspark", "eagle3_tree", "dflash_tree"]
DEFAULTS = default_settings(ALL_METHODS)


def run(client, **changes):
    return client.predict(**{**RUN, **changes}, api_name="/run")


def output_text_of(lane: str) -> str:
    """The text of the tokens the lane marks as output, as a browser would show it."""
    spans = re.findall(r'<span class="tok [^"]*" data-out title="[^"]*">(.*?)</span>', lane, flags=re.S)
    return "".join(html.unescape(s) for s in spans)


_DEFAULT_APPS: dict[int, object] = {}


def default_app(engine):
    """build_app(engine) with its defaults, built once per test process (a build costs most of a second of CPU) and
    shared by the files that only call its handlers, each test as visitors of its own that no other test is, and
    change nothing of it for longer than a test (monkeypatch). A file that changes the app keeps a build of its own."""
    if id(engine) not in _DEFAULT_APPS:
        _DEFAULT_APPS[id(engine)] = (engine, build_app(engine))  # the engine kept: its id is never another's
    return _DEFAULT_APPS[id(engine)][1]


@pytest.fixture(scope="module")
def launched(random_engine):
    """The app served in this process: (its Blocks, its URL)."""
    demo = build_app(random_engine, job_budget_s=600)  # the Stop test runs the longest comparison the page has
    yield demo, launch_locally(demo)
    demo.close()


@pytest.fixture(scope="module")
def launched_app(launched):
    return launched[1]


def assert_clean_log(capfd, caplog):
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, err[-2000:]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text[-2000:]


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


# The Run button's inputs in the order the page and the API send them (CompareHandlers.on_run reads them by name)
from app.settings import RUN_INPUTS as RUN_ORDER  # noqa: E402


def comparison_of(engine, methods, prompt: str = PROMPT, drafters: dict | None = None, device: str = "cpu",
                  **config) -> "Comparison":
    """A comparison of `methods` run on `engine` as a file would hold it: every lane with `config` (GenerationConfig
    fields), the page's settings saying the same (drafts_per_step as the serial K)."""
    lanes = {m: engine.generate(prompt, GenerationConfig(method=m, **config)) for m in methods}
    controls = {k: v for k, v in config.items() if k in ("max_new_tokens", "temperature", "seed", "tree_nodes",
                                                         "requests_at_once")}
    if "drafts_per_step" in config:
        controls["drafts_per_step_serial"] = config["drafts_per_step"]
    settings = settings_dict(replace(default_settings(), prompt=prompt, methods=tuple(methods), **controls))
    return Comparison.of_steps(settings, {m: [r.prefill, *r.steps] for m, r in lanes.items()}, drafters=drafters,
                               device=device, preset="random")


def raw_inputs(**changes) -> list:
    values = {**RUN, **changes}
    return [values[name] for name in RUN_ORDER]


def query_items(query: str) -> list[tuple[str, str]]:
    """The query as the server reads it (Starlette's parser, repeats kept), the way gr.Request hands it over."""
    from starlette.datastructures import QueryParams

    return list(QueryParams(query).multi_items())
