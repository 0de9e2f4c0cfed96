"""The serving lane as a measurement (`python -m app.servers.measure`): a prompt set sent to a stub vLLM or SGLang
server at concurrency 4 comes back as the bench's per-prompt rows, each figure labelled by its source, the server's
counters kept as its claim, and a bench report over the same prompt file set beside it."""

from __future__ import annotations

import csv
import json

import pytest

from app.servers.measure import main
from serving_stub import Script, Stub, closed_port

PROMPTS = [("def add(a, b):", "code"), ("import os", "code"), ("Hello there", "chat"), ("class Queue:", "code"),
           ("What is 2 + 2?", "chat"), ("for i in range(3):", "code")]


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "kind": k}) + "\n" for p, k in PROMPTS))
    return path


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_prompt_set_at_concurrency_4_into_the_benchs_rows(engine, prompt_file, tmp_path, capsys):
    script = Script()
    out = tmp_path / "serving.json"
    with Stub(engine, script=script, piece_delay_s=0.02) as stub:
        status = main(["--server", f"s={stub.url},kind={engine}", "--prompts", str(prompt_file), "--concurrency", "4",
                       "--max-new-tokens", "12", "--by", "kind", "--json", str(out)])
        sent = sorted(body.get("prompt") or body.get("text") for method, _, _, body in stub.requests if method == "POST")
        most = stub.most_in_flight
    assert status == 0, capsys.readouterr().err
    assert sent == sorted(p for p, _ in PROMPTS) and 2 <= most <= 4  # every prompt once, never more than 4 at once
    report = json.loads(out.read_text())
    rows = report["prompt_rows"]
    assert [r["prompt_index"] for r in rows] == list(range(6)) and [r["kind"] for r in rows] == [k for _, k in PROMPTS]
    accepted, steps = sum(script.per_step_accepted), len(script.per_step_accepted)
    for row in rows:
        assert row["lane"] == "s" and row["origin"] == "server" and row["state"] == "done"
        assert row["tokens"] == len(script.pieces) and row["tokens_per_s"] == pytest.approx(
            row["tokens"] / row["wall_s"], rel=1e-3)
        assert (row["server_steps"], row["server_accepted"]) == (steps, accepted) and not row["server_problems"]
    figures = report["server_figures"]
    assert figures["source"] == "server" and figures["accepted"] == 6 * accepted and figures["tau"] == pytest.approx(
        1 + accepted / steps, abs=1e-4)
    assert report["throughput"]["source"] == "client" and report["throughput"]["tokens"] == 6 * len(script.pieces)
    assert report["server_counters"]["source"] == "metrics" and report["server_counters"]["shown_as"] == "the server's claim"
    assert report["concurrency"] == 4 and report["prompts"]["format"] == "jsonl" and len(report["prompts"]["sha256"]) == 64
    assert {k: g["answers"] for k, g in report["by"]["groups"].items()} == {"code": 4, "chat": 2}
    with open(out.with_suffix(".csv"), newline="") as file:
        assert [int(r["server_accepted"]) for r in csv.DictReader(file)] == [accepted] * 6
    table = capsys.readouterr().out
    assert "6/6 answers at concurrency 4" in table and "the server's claim" in table


def test_a_bench_over_the_same_prompts_is_set_beside_the_server(prompt_file, tmp_path, capsys):
    from engine.measure.decide import prompt_file_record

    bench = {"device": "cpu", "preset": "tiny", "prompts": prompt_file_record(prompt_file, 6),
             "prompt_rows": [{"lane": lane, "origin": "local", "prompt_index": i, "tokens": 12, "wall_s": 1.0,
                              "tokens_per_s": speed} for lane, speed in (("baseline", 12.0), ("dflash", 1e6))
                             for i in range(6)]}
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    out = tmp_path / "serving.json"
    with Stub("vllm") as stub:
        assert main(["--server", f"s={stub.url}", "--prompts", str(prompt_file), "--concurrency", "4",
                     "--beside", str(tmp_path / "bench.json"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {r["origin"] for r in report["prompt_rows"]} == {"local", "server"} and len(report["prompt_rows"]) == 18
    pairs = {(p["a"], p["b"]): p for p in report["beside"]["pairwise"]}
    assert set(pairs) == {("baseline", "s"), ("dflash", "s")} and pairs[("dflash", "s")]["faster"] == "dflash"
    assert "(different machines)" in capsys.readouterr().out
    (tmp_path / "other.txt").write_text("one\n")
    assert main(["--server", f"s={closed_port()}", "--prompts", str(tmp_path / "other.txt"),
                 "--beside", str(tmp_path / "bench.json"), "--json", str(out)]) == 2
    assert "ran another prompt file" in capsys.readouterr().err


def test_a_dead_server_and_bad_arguments_are_one_line_each(prompt_file, tmp_path, capsys):
    out = tmp_path / "serving.json"
    assert main(["--server", f"down={closed_port()}", "--prompts", str(prompt_file), "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["answers"] == 0 and report["errors"] == ["is not answering (connection refused): is it running?"]
    assert main(["--server", f"down={closed_port()}", "--prompts", str(prompt_file), "--concurrency", "0",
                 "--json", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: a concurrency of 0 is outside 1 to 256"
    assert main(["--server", f"down={closed_port()}", "--prompts", str(prompt_file), "--by", "lang",
                 "--json", str(out)]) == 2
    assert "has no 'lang' label" in capsys.readouterr().err
