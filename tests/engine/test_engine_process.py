"""The engine in a process of its own (engine/process.py): the same facts, steps and results as in the server's
process, a run stopped between two steps by closing its stream, errors as one line, and a prompt checked while
a run goes on."""

import os
import threading
import time

import pytest

from engine.process import EngineProcess, run_on
from engine.contract.types import EngineError, GenerationConfig, Stopped

PROMPT = "def parse(self, text):"


@pytest.fixture(scope="module")
def remote():
    engine = EngineProcess("tiny", "cpu", warm_up=False)
    yield engine
    engine.close()


def first_token_ids(engine, prompt: str) -> list[int]:  # a module-level function: it travels by name
    return engine.encode_prompt(prompt)[:3]


def test_the_child_holds_the_models_and_says_what_they_are(remote, embedded_engine):
    assert remote.pid != os.getpid()
    assert remote.preset == embedded_engine.preset and remote.device_name == embedded_engine.device_name
    assert remote.methods() == embedded_engine.methods()
    for m in remote.methods():
        assert remote.drafter_label(m) == embedded_engine.drafter_label(m)
        assert remote.drafter_label(m, 1.0) == embedded_engine.drafter_label(m, 1.0)
        assert remote.max_drafts(m) == embedded_engine.max_drafts(m)


def test_its_steps_and_results_are_the_engines_own(remote, embedded_engine):
    # DSpark's static cut: its throughput rule would first time the child's verifies (a second of forwards), and
    # how a run is scheduled is the same code in either process
    config = GenerationConfig(method="dspark", max_new_tokens=24, scheduler="static")
    here = embedded_engine.generate(PROMPT, config)
    steps = list(remote.stream(PROMPT, config))
    assert [t.id for s in steps for t in s.committed] == [t.id for s in (here.prefill, *here.steps) for t in s.committed]
    assert remote.generate(PROMPT, config).output_ids == here.output_ids


def test_closing_a_stream_stops_the_run_in_the_child_and_it_serves_the_next(remote):
    steps = remote.stream(PROMPT, GenerationConfig(method="baseline", max_new_tokens=200))
    first = [next(steps) for _ in range(3)]
    steps.close()
    assert len(first) == 3
    after = remote.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=8))
    assert len(after.output_ids) == 8


def test_a_bad_setting_is_the_engines_one_line(remote):
    with pytest.raises(EngineError, match="unknown method"):
        list(remote.stream(PROMPT, GenerationConfig(method="nonsense")))
    with pytest.raises(EngineError, match="the prompt is empty"):
        remote.generate("  ", GenerationConfig(method="baseline"))


def test_a_function_runs_where_the_models_are(remote, embedded_engine):
    assert run_on(remote, first_token_ids, PROMPT) == run_on(embedded_engine, first_token_ids, PROMPT)


def test_the_engines_process_runs_no_function_of_the_apps(remote):
    """The engine's process imports no app module: a function from app/ is refused before it travels."""
    from app.examples import example_prompts

    with pytest.raises(EngineError, match="is the app's"):
        remote.call(example_prompts)


def long_generation(engine, stop=None):  # module-level: it travels by name
    return engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=300), stop)


def test_a_stop_event_here_stops_the_job_there_between_two_steps(remote):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    began = time.monotonic()
    with pytest.raises(Stopped):
        remote.call(long_generation, stop=stop)
    assert time.monotonic() - began < 10
    with pytest.raises(Stopped):
        remote.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=300), stop)  # already set
    assert len(remote.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=4)).output_ids) == 4


def test_a_prompt_is_checked_while_a_run_goes_on(remote):
    started, answered = threading.Event(), threading.Event()

    def long_run():
        for _ in remote.stream(PROMPT, GenerationConfig(method="baseline", max_new_tokens=200)):
            started.set()
            if answered.is_set():  # the run was still going when the answer came: the rest of it proves nothing
                break

    worker = threading.Thread(target=long_run)
    worker.start()
    started.wait(30)
    began = time.monotonic()
    ids = remote.encode_prompt(PROMPT)
    answered_while_running = worker.is_alive()
    answered.set()
    worker.join()
    assert ids and answered_while_running, f"answered after {time.monotonic() - began:.2f} s, once the run ended"


@pytest.mark.slow
def test_the_app_runs_a_comparison_on_an_engine_in_its_own_process(remote, embedded_engine):
    from gradio_client import Client

    from app.main import build_app
    from app.draw.render import display_text
    from conftest import launch_locally
    from compare_support import output_text_of

    demo = build_app(remote)
    try:
        client = Client(launch_locally(demo), verbose=False)
        outputs = client.predict(prompt=PROMPT, methods=["baseline", "dflash"], temperature=0.0,
                                 drafts_per_step_serial=4, drafts_per_step_one_pass=7, max_new_tokens=16, seed=0,
                                 verify_rule="rejection", show_drafts=True, scheduler="throughput",
                                 confidence_threshold=0.5, overlap="auto", api_name="/run")
    finally:
        demo.close()
    status, lanes = outputs[0], [o for o in outputs[1:] if isinstance(o, str) and 'data-state="done"' in o]
    assert "done" in status and len(lanes) == 2
    expected = embedded_engine.generate(PROMPT, GenerationConfig(method="baseline", max_new_tokens=16)).text
    assert all(output_text_of(lane) == display_text(expected) for lane in lanes)


def test_a_request_checked_here_runs_there_as_it_is(remote, embedded_engine):
    """The proxy checks requests with the child's facts and tokenizer; the request travels whole (pickled) and the
    child runs it without checking again: the same tokens, the same capped drafts per step as in this process."""
    block = remote.max_drafts("dflash")
    configs = [GenerationConfig(method=m, max_new_tokens=12, drafts_per_step=block + 1) for m in ("baseline", "dflash")]
    there, here = remote.requests(PROMPT, configs), embedded_engine.requests(PROMPT, configs)
    assert there == here and [r.drafts_per_step for r in there] == [None, block]
    ran = remote.generate(there[1])
    assert ran.config == there[1].config and ran.output_ids == embedded_engine.generate(here[1]).output_ids
    assert [t.id for s in remote.stream(there[0]) for t in s.committed] == list(
        embedded_engine.generate(here[0]).output_ids)
