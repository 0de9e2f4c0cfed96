"""Server lanes: the client reads vLLM's and SGLang's documented answers (tests/serving_stub.py speaks them), every
figure a lane shows is checked against one computed here from the stub's own script, and a dead, slow, garbled or
metrics-less server costs its lane one line and nothing else. One short chromium run shows a server lane beside a
local lane."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from fractions import Fraction
from types import SimpleNamespace

import pytest

from app.servers import client as servers
from app.servers.lanes import ServerLaneHandlers, counters_html, server_lane_html
from app.servers.client import (NO_COUNTERS, ServerRun, ServerSpec, Timeouts, parse_counters, parse_server, read_counters,
                         servers_from, sglang_figures, stream_lane, vllm_figures)
from conftest import app_served, needs_chromium, page_on
from serving_stub import SGLANG_METRICS, VLLM_METRICS, Script, Stub, closed_port

SETTINGS = dict(temperature=0.0, max_new_tokens=12, seed=0)
# Patient enough that a loaded machine never makes a healthy stub look slow; the slow stubs below stall for
# SLOW_S, well past IMPATIENT's read timeout, so a lane gives up on them by that timeout whatever the load.
FAST = Timeouts(connect_s=5.0, read_s=5.0, total_s=30.0)
IMPATIENT = Timeouts(connect_s=5.0, read_s=1.0, total_s=30.0)
SLOW_S = 3.0


def ask(url: str, kind: str = "auto", timeouts: Timeouts = FAST, environ=None, **extra):
    """The lane's last state after asking the server once."""
    spec = ServerSpec("s", url, kind, extra.get("model"))
    return list(stream_lane(spec, "def add(a, b):", SETTINGS, timeouts=timeouts, environ=environ or {}))[-1]


def expected(script: Script):
    """What a lane must show, computed from the script's per-step counts (exact fractions)."""
    accepted, drafted, steps = script.per_step_accepted, script.per_step_drafted, len(script.per_step_accepted)
    return dict(tau=1 + Fraction(sum(accepted), steps), rate=Fraction(sum(accepted), sum(drafted)),
                per_position=[Fraction(sum(1 for a in accepted if a >= i), steps)
                              for i in range(1, script.num_spec_tokens + 1)],
                text="".join(script.pieces), tokens=len(script.pieces))


# --- naming servers ---------------------------------------------------------------------------------------

def test_servers_are_named_by_flag_or_environment_and_bad_names_refused():
    specs = servers_from(["a=http://127.0.0.1:8000"],
                         {"SPECLAB_SERVERS": "b=https://gpu.example:443/v,kind=sglang;c=http://h:1,model=Qwen/Qwen3-8B"})
    assert specs == [ServerSpec("a", "http://127.0.0.1:8000"), ServerSpec("b", "https://gpu.example:443/v", "sglang"),
                     ServerSpec("c", "http://h:1", "auto", "Qwen/Qwen3-8B")]
    for bad, says in [("nourl", "NAME=URL"), ("a=ftp://h", "http://"), ("a=http://u:p@h:1", "no credentials"),
                      ("a=http://h:99999", "bad port"), ("a=http://h,kind=tgi", "kind must be"),
                      ("a=http://h,colour=red", "unknown option"), ("a b=http://h", "NAME=URL")]:
        with pytest.raises(ValueError, match=says):
            parse_server(bad)
    with pytest.raises(ValueError, match="repeated: a"):
        servers_from(["a=http://h:1", "a=http://h:2"], {})


def test_a_bad_server_flag_is_one_line_before_any_model_loads(capsys):
    from app.__main__ import main

    assert main(["--server", "a=ftp://h"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_the_key_comes_from_the_environment_and_is_never_shown():
    secret = "sk-test-very-secret"
    with Stub("vllm") as stub:
        lane = ask(stub.url, environ={"SPECLAB_SERVER_KEY_S": secret, "SPECLAB_SERVER_KEY": "other"})
        sent = [headers.get("Authorization") for _, _, headers, _ in stub.requests]
    assert sent and all(h == f"Bearer {secret}" for h in sent)
    assert servers.api_key(ServerSpec("x-y", "http://h"), {"SPECLAB_SERVER_KEY": "k"}) == "k"
    assert secret not in repr(lane) and secret not in server_lane_html(lane)


# --- vLLM ---------------------------------------------------------------------------------------------

def test_vllm_detailed_answer_gives_every_figure():
    script = Script()
    want = expected(script)
    with Stub("vllm", detailed=True, script=script) as stub:
        lane = ask(stub.url)
        request = next(body for method, path, _, body in stub.requests if path == "/v1/completions")
    assert request["stream"] and request["stream_options"] == {"include_usage": True}
    assert request["model"] == "stub/model" and request["max_tokens"] == 12  # the model id read from /v1/models
    assert (lane.state, lane.kind, lane.error, lane.note) == ("done", "vllm", None, None)
    assert lane.text == want["text"] and lane.num_tokens == want["tokens"]
    spec = lane.spec
    assert spec.tau == pytest.approx(float(want["tau"])) and spec.acceptance_rate == pytest.approx(float(want["rate"]))
    assert spec.per_position == pytest.approx([float(p) for p in want["per_position"]])
    assert spec.per_step_accepted == tuple(script.per_step_accepted)
    assert lane.timing_from == "client" and lane.ttft_s >= 0 and lane.tokens_per_s > 0
    page = server_lane_html(lane, "def add(a, b):")
    assert f"τ <b>{float(want['tau']):.2f}</b>" in page and f"accepted / drafted <b>{float(want['rate']) * 100:.0f}%</b>" in page
    assert page.count('class="srv-step"') == len(script.per_step_accepted)
    assert [int(x) for x in page.split('data-accepted="')[1:] for x in [x.split('"')[0]]] == script.per_step_accepted
    for i, p in enumerate(want["per_position"], 1):
        assert f"position {i}</span>" in page and f"{float(p) * 100:.0f}%</span>" in page


def test_vllm_summary_answer_has_no_steps_and_says_so():
    script = Script(per_step_accepted=[1, 1, 4, 0], per_step_drafted=[4, 4, 4, 3])
    with Stub("vllm", detailed=False, script=script) as stub:
        lane = ask(stub.url, kind="vllm")
    want = expected(script)
    assert lane.spec.per_step_accepted is None and lane.spec.tau == pytest.approx(float(want["tau"]))
    assert lane.spec.acceptance_rate == pytest.approx(float(want["rate"]))  # 6 / 15: the drafted counts, not 4 × steps
    assert "--per-request-spec-decode-metrics detailed" in server_lane_html(lane)


def test_vllm_own_timing_is_preferred_when_the_server_reports_it():
    script = Script(timing={"time_to_first_token_ms": 85.2, "generation_time_ms": 1240.5, "queue_time_ms": 1.0,
                            "mean_itl_ms": 9.1, "tokens_per_second": 103.2})
    with Stub("vllm", script=script) as stub:
        lane = ask(stub.url)
    assert lane.timing_from == "server"
    assert (lane.ttft_s, lane.tpot_s, lane.tokens_per_s) == pytest.approx((0.0852, 0.0091, 103.2))
    assert "TTFT <b>85 ms</b>" in server_lane_html(lane) and "tokens/s <b>103</b>" in server_lane_html(lane)


def test_vllm_block_whose_counts_disagree_is_refused():
    block = Script().vllm_block(detailed=True)
    assert vllm_figures(block).num_steps == 5
    for broken in ({"num_spec_steps": 6}, {"num_accepted_draft_tokens": 11}, {"acceptance_histogram": "many"},
                   {"per_step_accepted": [3, 0, 2, 4, 0]}, {"num_draft_tokens": -1}):
        with pytest.raises(servers.ServerError):
            vllm_figures(block | broken)


# --- SGLang --------------------------------------------------------------------------------------------

def test_sglang_generate_answer_gives_every_figure():
    script = Script()
    want = expected(script)
    with Stub("sglang", script=script) as stub:
        lane = ask(stub.url)
        request = next(body for method, path, _, body in stub.requests if path == "/generate")
    assert request["stream"] and request["sampling_params"] == {"max_new_tokens": 12, "temperature": 0.0}
    assert (lane.state, lane.kind, lane.text, lane.num_tokens) == ("done", "sglang", want["text"], want["tokens"])
    assert lane.spec.tau == pytest.approx(float(want["tau"]))
    # SGLang's own spec_accept_length is completion tokens / verify steps: kept for the hover, not shown as τ
    assert lane.spec.reported_tau == pytest.approx(want["tokens"] / len(script.per_step_accepted))
    assert lane.spec.acceptance_rate == pytest.approx(sum(script.per_step_accepted) / (5 * script.num_spec_tokens))
    assert lane.spec.per_position == pytest.approx([float(p) for p in want["per_position"]])
    assert "SGLang reports no per-step counts" in server_lane_html(lane)


def test_sglang_older_field_names_are_read_too():
    meta = {"spec_verify_ct": 4, "spec_accept_token_num": 6, "spec_draft_token_num": 12, "spec_accept_rate": 0.5,
            "spec_accept_histogram": [1, 1, 1, 1]}
    figures = sglang_figures(meta)
    assert (figures.num_accepted, figures.num_drafted, figures.tau, figures.acceptance_rate) == (6, 12, 2.5, 0.5)
    assert figures.per_position == pytest.approx([3 / 4, 2 / 4, 1 / 4])
    assert sglang_figures({"completion_tokens": 3}) is None
    with pytest.raises(servers.ServerError, match="disagree"):
        sglang_figures(meta | {"spec_accept_token_num": 7})


# --- servers that fail -----------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_server_without_metrics_keeps_its_text_and_says_what_is_missing(engine):
    with Stub(engine, mode="no_metrics") as stub:
        lane = ask(stub.url)
    assert (lane.state, lane.spec, lane.error) == ("done", None, None)
    assert lane.text == "".join(Script().pieces)
    assert lane.note and ("--per-request-spec-decode-metrics" in lane.note or "--speculative-algorithm" in lane.note)
    assert server_lane_html(lane).count("srv-message") == 1


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_slow_server_is_given_up_after_the_read_timeout(engine):
    with Stub(engine, mode="slow", slow_s=SLOW_S) as stub:
        lane = ask(stub.url, kind=engine, timeouts=IMPATIENT)
    assert lane.state == "error" and "did not answer in time" in lane.error  # the read timeout, not the stall
    assert server_lane_html(lane).count("srv-message") == 1


def test_dead_garbled_and_failing_servers_each_give_one_line():
    dead = ask(closed_port())
    assert dead.state == "error" and "connection refused" in dead.error
    with Stub("vllm", mode="garbage") as stub:
        assert "not JSON on /v1/models" in ask(stub.url).error
        assert "not JSON on its stream" in ask(stub.url, kind="vllm").error
    with Stub("sglang", mode="error") as stub:
        assert ask(stub.url, kind="sglang").error.startswith("answered HTTP 500 to /generate")


def test_all_servers_run_at_once_and_a_bad_one_spoils_nothing_else():
    with Stub("vllm") as good, Stub("sglang", mode="slow", slow_s=SLOW_S) as slow:
        specs = [parse_server(f"good={good.url}"), parse_server(f"dead={closed_port()}"),
                 parse_server(f"slow={slow.url},kind=sglang")]
        run = ServerRun(specs, "p", SETTINGS, IMPATIENT, environ={})
        run.wait(10.0)  # the slow server stalls longer than the read timeout: its lane ends by that timeout
    assert not run.running()
    assert [lane.state for lane in run.lanes] == ["done", "error", "error"]
    assert run.lanes[0].spec is not None and run.lanes[0].error is None


def test_the_run_handler_checks_settings_and_streams_html():
    with Stub("vllm") as stub:
        handlers = ServerLaneHandlers([parse_server(f"v={stub.url}")], FAST)
        request = SimpleNamespace(session_hash="abc")
        pages = list(handlers.run("def f():", 0, 8, "0", request))
        refused = list(handlers.run("def f():", "hot", 8, "0", request))
    assert 'data-state="done"' in pages[-1][0] and "τ <b>" in pages[-1][0]
    assert refused == [[refused[0][0]]] and "not run" in refused[0][0]
    assert not handlers.running


class EndedAtOnce(ServerRun):
    """A run whose servers have all answered before the handler first looks (a refused connection can)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wait(5.0)


def test_the_run_handler_draws_a_dead_servers_line_however_fast_it_fails(monkeypatch):
    monkeypatch.setattr("app.servers.lanes.ServerRun", EndedAtOnce)
    handlers = ServerLaneHandlers([parse_server(f"dead={closed_port()}")], FAST)
    pages = list(handlers.run("def f():", 0, 8, "0", SimpleNamespace(session_hash="abc")))
    assert pages, "the handler drew nothing: the page would keep its empty lane"
    assert 'data-state="error"' in pages[-1][0] and "connection refused" in pages[-1][0]


# --- /metrics ----------------------------------------------------------------------------------------------

def test_vllm_counters_are_summed_over_engines_by_position():
    counters = parse_counters(VLLM_METRICS)
    drafts, drafted, accepted = 100 + 60, 400 + 240, 220 + 100
    assert (counters.num_drafts, counters.num_draft_tokens, counters.num_accepted) == (drafts, drafted, accepted)
    assert counters.tau == pytest.approx(1 + accepted / drafts)
    assert counters.acceptance_rate == pytest.approx(accepted / drafted)
    assert counters.per_position == pytest.approx([(90 + 50) / drafts, (70 + 30) / drafts, (40 + 15) / drafts,
                                                   (20 + 5) / drafts])
    per_pos = "".join(f'vllm:spec_decode_num_draft_tokens_per_pos_total{{position="{p}"}} {n}\n'
                      for p, n in enumerate([160, 150, 100, 50]))
    assert parse_counters(VLLM_METRICS + per_pos).per_position == pytest.approx([140 / 160, 100 / 150, 55 / 100,
                                                                                 25 / 50])


def test_sglang_gauges_and_missing_counters():
    counters = parse_counters(SGLANG_METRICS)
    assert (counters.kind, counters.tau, counters.acceptance_rate) == ("sglang", 3.25, 0.5625)
    assert parse_counters("process_cpu_seconds_total 1.0\n") is None
    with Stub("vllm", mode="no_metrics") as stub:
        assert read_counters(parse_server(f"v={stub.url}"), FAST) == NO_COUNTERS
    page = counters_html("v", read_counters(parse_server(f"v={closed_port()}"), FAST))
    assert "connection refused" in page and page.count("status-error") == 1


# --- in the browser ---------------------------------------------------------------------------------------

@pytest.mark.browser
@needs_chromium
def test_a_server_lane_runs_beside_a_local_lane_in_chromium(random_engine, chromium):
    with Stub("vllm") as stub:
        specs = [parse_server(f"vllm-dflash={stub.url}"), parse_server(f"down={closed_port()}")]
        with app_served(random_engine, servers=specs, server_timeouts=FAST) as url, \
                page_on(chromium, viewport={"width": 1500, "height": 1100}) as page:
            page.goto(url, wait_until="networkidle")
            for name in ("AR", "DFlash", "DSpark"):  # the shortest run: the baseline alone, 4 tokens
                page.locator("#lanes label").get_by_text(name, exact=True).click()
            page.fill("#max-new-tokens input[type=number]", "4")
            page.press("#max-new-tokens input[type=number]", "Enter")
            page.click("#run")
            page.wait_for_selector("#server-vllm-dflash .lane-card[data-state=done]", timeout=30_000)
            page.wait_for_selector("#server-down .lane-card[data-state=error]", timeout=30_000)
            page.wait_for_selector("#status :text('done')", timeout=30_000)
            server, local = page.locator("#server-vllm-dflash"), page.locator("#lane-baseline")
            assert server.locator(".srv-text").text_content() == "".join(Script().pieces)
            assert server.locator(".srv-step").count() == len(Script().per_step_accepted)
            assert "connection refused" in page.locator("#server-down .srv-message").text_content()
            assert local.locator(".lane-card").get_attribute("data-state") == "done"
            # side by side once the page has settled: the lanes' heights change as the last results are drawn
            deadline = time.monotonic() + 5
            while True:
                beside = server.bounding_box(), local.bounding_box()
                if abs(beside[0]["y"] - beside[1]["y"]) < 5 or time.monotonic() > deadline:
                    break
                page.wait_for_timeout(100)
            assert abs(beside[0]["y"] - beside[1]["y"]) < 5 and beside[0]["x"] > beside[1]["x"]


def test_counters_that_cannot_be_true_are_shown_as_the_servers_claim():
    """Accepted above drafted, a rate above 1 or infinite, τ below 1: each named in one line, the chips marked as
    the server's claim, and never an "inf%"; counters that hold together carry no such line."""
    from app.servers.claims import CLAIM, counter_problems, figure_problems
    from app.servers.client import ServerCounters, SpecFigures

    assert counter_problems(parse_counters(VLLM_METRICS)) == [] and counter_problems(parse_counters(SGLANG_METRICS)) == []
    assert CLAIM not in counters_html("v", parse_counters(VLLM_METRICS))
    more = ServerCounters("vllm", num_drafts=10, num_draft_tokens=40, num_accepted=55, accepted_per_pos=(9, 12))
    assert counter_problems(more) == ["accepted 55 > drafted 40", "accepted at position 2 12 > 10 drafted there",
                                      "acceptance rate 1.375 is outside 0–1"]
    page = counters_html("v", more)
    assert f"acc. rate ({CLAIM}) <b>138%</b>" in page and page.count("srv-claim") == 1 and "accepted 55 &gt; drafted 40" in page
    sglang = parse_counters(SGLANG_METRICS.replace("0.5625", "+Inf").replace("3.25", "0.5"))
    assert counter_problems(sglang) == ["acceptance rate is inf", "accept length 0.5 is below 1"]
    page = counters_html("s", sglang)
    assert "inf%" not in page and f"acc. rate ({CLAIM}) <b>infinite</b>" in page
    assert counter_problems(ServerCounters("sglang", accept_length=0.5, accept_rate=0.4)) == ["accept length 0.5 is below 1"]
    figures = SpecFigures(4, 9, 6, None, None, None, 3.25, 1.5)
    assert figure_problems(figures) == ["accepted 9 > drafted 6", "the reported rate 1.5 is outside 0–1"]
    lane = SimpleNamespace(name="s", kind="sglang", state="done", text="x", num_tokens=3, ttft_s=0.1, tpot_s=0.01,
                           tokens_per_s=10.0, timing_from="client", spec=figures, error=None, note=None)
    page = server_lane_html(lane)
    assert f"accepted / drafted ({CLAIM}) <b>150%</b>" in page and "srv-claim" in page


def test_a_comparisons_download_carries_the_server_lanes_figures_as_the_servers(random_engine):
    """The server lanes' ended answers go into the comparison file's "servers" block, each marked as the server's
    report with its checks' findings, and read back from the file as they were written."""
    from app.comparison import read_comparison
    from app.servers.claims import CLAIM

    script = Script()
    with Stub("vllm", script=script) as stub:
        handlers = ServerLaneHandlers([parse_server(f"v={stub.url}"), parse_server(f"down={closed_port()}")], FAST)
        request = SimpleNamespace(session_hash="s1")
        list(handlers.run("def add(a, b):", 0, 12, 0, request))
    figures = handlers.figures("s1")
    want = expected(script)
    assert figures["v"]["source"] == "server" and figures["v"]["shown_as"] == CLAIM and figures["v"]["problems"] == []
    assert figures["v"]["tau"] == pytest.approx(float(want["tau"])) and figures["v"]["accepted"] == sum(
        script.per_step_accepted)
    assert figures["down"]["state"] == "error" and "connection refused" in figures["down"]["error"]
    assert handlers.figures("a browser that ran nothing") == {}
    from compare_support import comparison_of

    comparison = comparison_of(random_engine, ["baseline"])
    assert "servers" not in comparison.to_json()  # no server lanes: no block
    saved = replace(comparison, servers=figures).to_json()
    assert read_comparison(saved).servers == json.loads(saved)["servers"] == json.loads(json.dumps(figures))
