"""A server under load (app/servers/load.py): C requests sent at once to the stub server, every answer's figures
read and summed, checked against the stub's own script; a dead server and a bad concurrency are one line each."""

from __future__ import annotations

import threading
from fractions import Fraction

import pytest

from app.servers.client import ServerSpec, Timeouts
from app.servers.load import at_concurrency, load_sweep, main, table
from serving_stub import Script, Stub, closed_port

SETTINGS = dict(temperature=0.0, max_new_tokens=12, seed=0)
FAST = Timeouts(connect_s=5.0, read_s=5.0, total_s=30.0)


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_requests_sent_at_once_are_all_answered_and_their_figures_summed(kind):
    script = Script()
    with Stub(kind, script=script, piece_delay_s=0.01) as stub:
        sweep = load_sweep(ServerSpec("s", stub.url, kind), ["def f(x):", "import os"], [1, 4], SETTINGS, FAST, {})
        asked = [path for _, path, _, _ in stub.requests if path in ("/v1/completions", "/generate")]
    assert len(asked) == 1 + 4  # every request of every row reached the server
    steps, accepted = len(script.per_step_accepted), sum(script.per_step_accepted)
    for row in sweep["rows"]:
        assert row["answers"] == row["with_spec_figures"] == row["concurrency"] and row["errors"] == []
        assert row["tokens"] == len(script.pieces) * row["concurrency"]
        assert row["tau"] == pytest.approx(float(1 + Fraction(accepted, steps)))  # the same script every answer
        assert row["tokens_per_s"] == pytest.approx(row["tokens"] / row["wall_s"])
    assert "| 4 | 4/4 |" in table(sweep)


def test_requests_overlap_on_the_server():
    """The C requests are in flight together, not one after another: the stub sees them at once."""
    inside, most = 0, 0
    lock = threading.Lock()
    with Stub("vllm", piece_delay_s=0.02) as stub:
        handle = stub.httpd.RequestHandlerClass.do_POST

        def counting(handler):
            nonlocal inside, most
            with lock:
                inside += 1
                most = max(most, inside)
            try:
                return handle(handler)
            finally:
                with lock:
                    inside -= 1

        stub.httpd.RequestHandlerClass.do_POST = counting
        try:
            row = at_concurrency(ServerSpec("s", stub.url, "vllm"), ["x = 1"], 4, SETTINGS, FAST, {})
        finally:
            stub.httpd.RequestHandlerClass.do_POST = handle
    assert row["answers"] == 4 and most == 4


def test_a_dead_server_gives_one_line_per_row_and_no_answers():
    row = at_concurrency(ServerSpec("s", closed_port(), "vllm"), ["x"], 2, SETTINGS, FAST, {})
    assert row["answers"] == 0 and row["tokens_per_s"] == 0 and len(row["errors"]) == 1
    assert "\n" not in row["errors"][0]


def test_the_command_refuses_a_bad_concurrency_or_server_in_one_line(capsys):
    assert main(["--server", "s=http://127.0.0.1:9", "--concurrency", "0"]) == 2
    assert main(["--server", "no-url", "--concurrency", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "a concurrency of 0 is outside" in lines[0] and "NAME=URL" in lines[1]
