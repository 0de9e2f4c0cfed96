"""A small HTTP server for the tests that answers as vLLM or SGLang do, in their documented shapes.

vLLM: `GET /v1/models` (owned_by "vllm"), `POST /v1/completions` streamed as server-sent events: one chunk per
text piece, then the usage chunk (empty `choices`) carrying `metrics.speculative_decoding`
(`--per-request-spec-decode-metrics`, detailed mode adds `per_step_accepted`/`per_step_drafted`) and, when
asked, the per-request timing fields; `GET /metrics` with the `vllm:spec_decode_*` counters.
SGLang: `GET /v1/models` (owned_by "sglang"), `POST /generate` streamed, each chunk the whole text so far and a
`meta_info` whose last one carries `spec_verify_ct`, the draft counts and the acceptance histogram;
`GET /metrics` with its gauges.

Modes: normal, no_metrics (an older server or metrics not enabled), slow (stalls after the first piece),
garbage (answers that are not JSON), error (HTTP 500). A dead server is a closed port (`closed_port`).
The figures come from one list of accepted counts per step, so a test can compute what the lane must show.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scripts.support import free_port


@dataclass
class Script:
    """What the stub answers: the text pieces, and each verify step's accepted and drafted counts."""

    pieces: list[str] = field(default_factory=lambda: ["def", " add", "(a", ",", " b", "):", "\n", "   ", " return",
                                                       " a", " +", " b"])
    per_step_accepted: list[int] = field(default_factory=lambda: [3, 0, 2, 4, 1])
    per_step_drafted: list[int] = field(default_factory=lambda: [4, 4, 4, 4, 4])
    num_spec_tokens: int = 4
    timing: dict | None = None  # vLLM's per-request timing fields, when the server reports them

    def histogram(self) -> list[int]:
        return [self.per_step_accepted.count(j) for j in range(self.num_spec_tokens + 1)]

    def vllm_block(self, detailed: bool) -> dict:
        accepted, drafted, steps = sum(self.per_step_accepted), sum(self.per_step_drafted), len(self.per_step_accepted)
        block = {"mean_acceptance_length": 1 + accepted / steps, "draft_acceptance_rate": accepted / drafted,
                 "acceptance_histogram": self.histogram(), "num_spec_steps": steps,
                 "num_accepted_draft_tokens": accepted, "num_draft_tokens": drafted,
                 "num_spec_tokens": self.num_spec_tokens}
        if detailed:
            block |= {"per_step_accepted": list(self.per_step_accepted), "per_step_drafted": list(self.per_step_drafted)}
        return block

    def sglang_meta(self) -> dict:
        accepted, steps = sum(self.per_step_accepted), len(self.per_step_accepted)
        proposed = steps * self.num_spec_tokens
        return {"spec_accept_rate": accepted / proposed, "spec_accept_length": len(self.pieces) / steps,
                "spec_num_correct_drafts": accepted, "spec_num_proposed_drafts": proposed, "spec_verify_ct": steps,
                "spec_accepted_drafts": accepted, "spec_proposed_drafts": proposed,
                "spec_correct_drafts_histogram": self.histogram(), "spec_accept_histogram": self.histogram()}


VLLM_METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 60.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 400.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 240.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 220.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 100.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="3"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 15.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="3"} 5.0
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""
SGLANG_METRICS = """# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m"} 3.25
sglang:spec_accept_rate{model_name="m"} 0.5625
sglang:num_running_reqs{model_name="m"} 0.0
"""


class StubHandler(BaseHTTPRequestHandler):
    server_version = "stub"

    def log_message(self, *args):  # quiet
        pass

    @property
    def stub(self) -> "Stub":
        return self.server.stub  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, content_type: str = "application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _event(self, payload) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def do_GET(self):
        self.stub.requests.append(("GET", self.path, dict(self.headers), None))
        if self.stub.mode == "garbage":
            return self._send(200, b"<html>this is not the API</html>", "text/html")
        if self.stub.mode == "error":
            return self._send(500, b'{"error": "internal"}')
        if self.path == "/v1/models":
            return self._send(200, json.dumps({"object": "list", "data": [
                {"id": "stub/model", "object": "model", "owned_by": self.stub.engine}]}).encode())
        if self.path == "/metrics":
            text = "" if self.stub.mode == "no_metrics" else VLLM_METRICS if self.stub.engine == "vllm" else SGLANG_METRICS
            return self._send(200, (text + "process_cpu_seconds_total 1.0\n").encode(), "text/plain")
        self._send(404, b'{"error": "not found"}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.stub.requests.append(("POST", self.path, dict(self.headers), body))
        if self.stub.mode == "error":
            return self._send(500, b'{"error": "internal"}')
        if self.path not in ("/v1/completions", "/generate"):
            return self._send(404, b'{"error": "not found"}')
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if self.stub.mode == "garbage":
            self._event("<html>not json</html>")
            return
        with self.stub.lock:
            self.stub.in_flight += 1
            self.stub.most_in_flight = max(self.stub.most_in_flight, self.stub.in_flight)
        self.streaming = True
        try:
            (self._stream_vllm if self.path == "/v1/completions" else self._stream_sglang)(body)
        finally:
            self._answered()

    def _answered(self) -> None:
        """This answer no longer counts as in flight: called before its last event is written (a client that has
        read it may send its next request at once, before this thread runs on), or when the answer breaks off."""
        if getattr(self, "streaming", False):
            self.streaming = False
            with self.stub.lock:
                self.stub.in_flight -= 1

    def _end(self) -> None:
        self._answered()
        self._event("[DONE]")

    def _pieces(self):
        for i, piece in enumerate(self.stub.script.pieces):
            if self.stub.mode == "slow" and i == 1:
                time.sleep(self.stub.slow_s)
            time.sleep(self.stub.piece_delay_s)
            yield piece

    def _stream_vllm(self, request: dict):
        script = self.stub.script
        for piece in self._pieces():
            self._event({"id": "cmpl-1", "object": "text_completion", "model": "stub/model",
                         "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": None}],
                         "usage": None})
        final = {"id": "cmpl-1", "object": "text_completion", "model": "stub/model", "choices": [],
                 "usage": {"prompt_tokens": 7, "completion_tokens": len(script.pieces),
                           "total_tokens": 7 + len(script.pieces)}}
        if (request.get("stream_options") or {}).get("include_usage"):
            if self.stub.mode != "no_metrics":
                final["metrics"] = dict(script.timing or {}) | {"speculative_decoding": script.vllm_block(self.stub.detailed)}
            self._event(final)
        self._end()

    def _stream_sglang(self, request: dict):
        script, text = self.stub.script, ""
        for n, piece in enumerate(self._pieces(), 1):
            text += piece
            meta = {"id": "r1", "prompt_tokens": 7, "completion_tokens": n, "cached_tokens": 0,
                    "finish_reason": None}
            if n == len(script.pieces):
                meta["finish_reason"] = {"type": "length", "length": n}
                if self.stub.mode != "no_metrics":
                    meta |= script.sglang_meta()
            self._event({"text": text, "output_ids": list(range(n)), "meta_info": meta})
        self._end()


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up on a slow answer (as the tests make it) is expected here


class Stub:
    """One stub server on a free loopback port, in a thread; use as a context manager."""

    def __init__(self, engine: str = "vllm", mode: str = "normal", detailed: bool = True, script: Script | None = None,
                 slow_s: float = 1.0, piece_delay_s: float = 0.0):
        self.engine, self.mode, self.detailed, self.slow_s = engine, mode, detailed, slow_s
        self.piece_delay_s = piece_delay_s  # a pause before each text piece, as a real server streams
        self.script = script or Script()
        self.requests: list[tuple] = []
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0  # answers being streamed now, and the most at once so far
        self.httpd = QuietServer(("127.0.0.1", 0), StubHandler)
        self.httpd.stub = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "Stub":
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> str:
    """The address of a port nothing listens on (a dead server)."""
    return f"http://127.0.0.1:{free_port()}"
