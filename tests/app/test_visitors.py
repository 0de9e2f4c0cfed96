"""What a crowd may cost the server, at the HTTP level and without a server: the page built once per address and
served from memory, the per-address limit on requests that bypass the queue, and a full queue answered in the
app's words. (tests/app/test_page.py checks the same through a launched app and Gradio's own routes.)"""

from __future__ import annotations

import asyncio
import gzip
import json
from types import SimpleNamespace

import brotli
import pytest

from app.hosting.addresses import (BURST, CLASS_PAGES, PAGE_REQUESTS, RATE, FullQueueWords, TokenBuckets, VisitorLimit,
                           expected_wait_s, full_queue_words)
from app.run.page_sessions import PageCache, accepted_encodings, page_key

PAGE = b"<html>" + b"the page's configuration " * 2000 + b"</html>"


def request(path: str = "/", query: bytes = b"", method: str = "GET", client: str = "203.0.113.5",
            headers: dict | None = None) -> dict:
    return {"type": "http", "method": method, "path": path, "query_string": query, "scheme": "http",
            "root_path": "", "server": ("127.0.0.1", 7860), "client": (client, 50000),
            "headers": [(k.encode(), v.encode()) for k, v in {"host": "127.0.0.1:7860", **(headers or {})}.items()]}


class Inner:
    """An ASGI app that answers every request with `body` (and `status`), counting the requests it answered."""

    def __init__(self, body: bytes = PAGE, status: int = 200, content_type: bytes = b"text/html; charset=utf-8"):
        self.body, self.status, self.content_type, self.calls = body, status, content_type, 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [(b"content-type", self.content_type),
                                (b"content-length", str(len(self.body)).encode())]})
        await send({"type": "http.response.body", "body": self.body})


def serve(app, scope: dict) -> tuple[int, dict, bytes]:
    """The status, headers and body `app` answers `scope` with."""
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    asyncio.run(app(scope, receive, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


# --- the page from memory --------------------------------------------------------------------------------

def test_the_page_is_built_once_per_address_and_served_compressed_from_memory():
    inner, blocks = Inner(), SimpleNamespace(config={"v": 1})
    cache = PageCache(inner, blocks)
    for accepted, coding, decode in (("gzip, deflate, br, zstd", "br", brotli.decompress),
                                     ("gzip", "gzip", gzip.decompress), ("", None, lambda body: body)):
        status, headers, body = serve(cache, request("/", b"lesson=4&prompt=x", headers={"accept-encoding": accepted}))
        assert status == 200 and decode(body) == PAGE and int(headers["content-length"]) == len(body)
        assert headers.get("content-encoding") == coding and headers["vary"] == "accept-encoding"
    serve(cache, request("/config"))
    assert inner.calls == 2  # the page once (whatever its link's parameters), its configuration once
    serve(cache, request("/", headers={"x-forwarded-host": "speclab.example"}))
    assert inner.calls == 3  # another address is another page (Gradio writes the address into it)
    blocks.config = {"v": 2}  # Gradio replaced the configuration: the page is built again
    serve(cache, request("/"))
    assert inner.calls == 4


def test_only_the_page_and_its_configuration_are_kept_and_only_when_complete():
    assert page_key(request("/", b"deep_link=abc")) is None  # Gradio reads these itself
    assert page_key(request("/", b"page=other")) is None
    assert page_key(request("/", method="HEAD")) is None
    assert page_key(request("/gradio_api/info")) is None
    assert page_key(request("/", b"lesson=3")) == page_key(request("/", b"prompt=x&seed=2"))
    failing = Inner(b"error", status=500)
    cache = PageCache(failing, SimpleNamespace(config={}))
    serve(cache, request("/"))
    serve(cache, request("/"))
    assert failing.calls == 2 and not cache.answers


def test_accept_encoding_is_read_with_its_weights():
    weighed = request(headers={"accept-encoding": "gzip;q=0, br;q=0.5, identity"})
    assert accepted_encodings(weighed) == {"br", "identity"}
    assert accepted_encodings(request(headers={"accept-encoding": "br;q=x"})) == {"br"}
    assert accepted_encodings(request()) == set()


# --- the limit on requests that bypass the queue -------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_class_behind_one_address_opens_a_link_together_and_a_flood_is_slowed():
    clock = Clock()
    buckets = TokenBuckets(clock=clock)
    assert all(buckets.take("school") == 0 for _ in range(CLASS_PAGES * PAGE_REQUESTS))  # a class, every page
    assert all(buckets.take("school") == 0 for _ in range(BURST - CLASS_PAGES * PAGE_REQUESTS))  # and once more
    assert buckets.take("school") == pytest.approx(1 / RATE)  # then one request per 1/RATE s
    assert buckets.take("elsewhere") == 0  # another address has its own bucket
    clock.now += 1.0  # a second later: RATE more
    assert all(buckets.take("school") == 0 for _ in range(int(RATE))) and buckets.take("school") > 0
    clock.now += 3600
    assert all(buckets.take("school") == 0 for _ in range(BURST))  # refilled, never past BURST


def test_the_buckets_kept_are_bounded():
    buckets = TokenBuckets(burst=2, rate=1, capacity=3, clock=Clock())
    for address in range(10):
        buckets.take(str(address))
    assert list(buckets.buckets) == ["7", "8", "9"]


def test_past_its_bucket_an_address_gets_429_in_the_apps_words_joins_included_and_static_files_pass():
    inner = Inner(b"ok", content_type=b"text/plain")
    limit = VisitorLimit(inner, TokenBuckets(burst=2, rate=0.5, clock=Clock()))
    assert [serve(limit, request("/"))[0] for _ in range(2)] == [200, 200]
    status, headers, body = serve(limit, request("/"))
    assert status == 429 and headers["retry-after"] == "2"
    assert body.decode() == "SpecLab: too many requests from your address at once; please try again in 2 s.\n"
    status, headers, body = serve(limit, request("/gradio_api/run/predict", method="POST"))
    assert status == 429 and json.loads(body)["error"].startswith("SpecLab: too many requests")  # as the page reads it
    assert serve(limit, request("/gradio_api/queue/join", method="POST"))[0] == 429  # a place in the queue counts
    for path in ("/gradio_api/queue/data", "/gradio_api/heartbeat/x", "/assets/index.js", "/static/fonts/a.woff2"):
        assert serve(limit, request(path))[0] == 200
    assert serve(limit, request("/", client="198.51.100.9"))[0] == 200


# --- a full queue --------------------------------------------------------------------------------------

def test_the_expected_wait_sums_each_waiting_jobs_mean_duration_counting_identical_ones_once():
    run, live, check, new = object(), object(), object(), object()

    def job(fn, *data):
        return SimpleNamespace(fn=fn, data=SimpleNamespace(data=list(data)))

    queue = SimpleNamespace(
        event_queue_per_concurrency_id={
            "engine": SimpleNamespace(queue=[job(run, "def f"), job(run, "def g"), *(job(live) for _ in range(35))]),
            "open-file": SimpleNamespace(queue=[job(check), job(new)])},
        process_time_per_fn={run: SimpleNamespace(avg_time=10.0), live: SimpleNamespace(avg_time=20.0),
                             check: SimpleNamespace(avg_time=2.5)})
    assert expected_wait_s(queue, default_job_s=15.0) == 10 + 10 + 20 + 2.5 + 15
    assert "about 40 s" in full_queue_words(37.5) and "about 4 minutes" in full_queue_words(200)
    assert "about 5 s" in full_queue_words(0)  # a wait is never "about 0 s"


def test_gradios_full_queue_is_answered_in_the_apps_words_and_other_refusals_pass():
    from gradio.queueing import Queue

    full = Queue(live_updates=False, concurrency_count=1, update_intervals=1, max_size=0, blocks=None)
    _, detail, state = asyncio.run(full.push(SimpleNamespace(fn_index=0), None, None))
    assert state == "queue_full" and detail.startswith(FullQueueWords.GRADIO_FULL)  # the installed Gradio's words
    blocks = SimpleNamespace(_queue=SimpleNamespace(event_queue_per_concurrency_id={}, process_time_per_fn={}))
    join = request("/gradio_api/queue/join", method="POST")
    status, headers, body = serve(FullQueueWords(Inner(json.dumps({"detail": detail}).encode(), 503), blocks), join)
    assert status == 429 and headers["retry-after"] == "1"
    assert json.loads(body)["detail"].startswith("SpecLab is busy: every place in the queue of runs is taken")
    stopped = json.dumps({"detail": "Queue is stopped."}).encode()
    assert serve(FullQueueWords(Inner(stopped, 503), blocks), join) == (503, {
        "content-type": "text/html; charset=utf-8", "content-length": str(len(stopped))}, stopped)
    assert serve(FullQueueWords(Inner(b'{"event_id": "1"}'), blocks), join)[0] == 200


def test_behind_a_spaces_proxy_the_visitor_is_the_address_the_proxy_saw(monkeypatch):
    """The Space's entry trusts proxies on private networks: the HTTP server (uvicorn) then takes the last
    X-Forwarded-For entry such a proxy did not add, so a visitor's own forged entries name no one."""
    import os

    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from app.hosting.addresses import PRIVATE_NETWORKS, client_address, trust_private_proxies

    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    trust_private_proxies()
    assert os.environ["FORWARDED_ALLOW_IPS"] == PRIVATE_NETWORKS
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "192.0.2.1")
    trust_private_proxies()
    assert os.environ["FORWARDED_ALLOW_IPS"] == "192.0.2.1"  # an operator's own setting stays

    seen = []

    async def app(scope, receive, send):
        seen.append(client_address(scope))

    proxied = ProxyHeadersMiddleware(app, trusted_hosts=PRIVATE_NETWORKS)
    for peer, forwarded in (("10.0.3.7", "6.6.6.6, 203.0.113.9, 10.0.0.2"), ("203.0.113.50", "6.6.6.6")):
        scope = request(client=peer, headers={"x-forwarded-for": forwarded})
        asyncio.run(proxied(scope, None, None))
    assert seen == ["203.0.113.9", "203.0.113.50"]  # from the proxy: the visitor; from anyone else: the connection
