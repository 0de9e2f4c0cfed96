"""The app's own answers at the server's door, before Gradio's: an over-long address, too many requests from one
visitor's address, a full queue. Each is an ASGI middleware that `app.main.launch` installs.

**Over-long addresses.** Gradio builds every page's root URL with httpx, which refuses an address longer than
65,536 characters: such a request would end in a bare HTTP 500 and a traceback in the log. `LongAddressGuard`
answers it first, with HTTP 414 and one line a visitor can act on. The app's "Copy link" never makes a link this
long (app/tabs/compare.py MAX_LINK_CHARS), so only a hand-made or truncated-and-pasted address ever meets it.

**Requests that bypass the queue, and joining it.** Runs wait their turn in Gradio's queue, but a page load, a
file, an event the app answers at once (Stop, a lesson's "Show me") is served as it comes; asking for a place in
the queue is counted too (each place is also bounded per address: app/hosting/fairness.py). `VisitorLimit` gives
each client address a bucket of BURST such requests, refilled at RATE a second (a class member,
app/hosting/classroom.py, a bucket of its own); an empty bucket gets HTTP 429, a Retry-After and one line. A class
behind one address (a school's NAT) opening a link together is CLASS_PAGES pages of PAGE_REQUESTS
counted requests each, and fits in the bucket twice over. The client address is the one the HTTP server (uvicorn)
reports: the connection's own, or, from a trusted proxy (uvicorn's FORWARDED_ALLOW_IPS: the loopback unless set;
a Space's entry point trusts the private networks its proxy sits in), the last X-Forwarded-For entry that proxy
did not add itself.

**A full queue.** Gradio refuses a run past the queue's size with HTTP 503 and "Queue is full. Max size is 32 and
size is 32.", and the page then shows its own fixed sentence instead of the server's. `FullQueueWords` answers
HTTP 429 instead (a status whose words the page shows), in the app's words, with the expected wait (each waiting
job's estimated duration, identical ones once, and what is left of the running one) in the text and in Retry-After.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import OrderedDict
from urllib.parse import parse_qsl

MAX_ADDRESS_CHARS = 65_536  # httpx's own limit on a URL (its parser refuses anything longer)
MESSAGE = (b"SpecLab: this address is too long for the server to open (it has room for about 64,000 characters). "
           b"A share link this long cannot carry its comparison: open the page without it, and share the file "
           b"from \"Download this comparison\" instead.\n")

# A page load makes PAGE_REQUESTS counted requests (the page, its theme, its three load events: the link's settings,
# the download offer, the lesson point; besides the frontend's own static files, as chromium loads it);
# CLASS_PAGES pages at once from one address must pass.
PAGE_REQUESTS = 5
CLASS_PAGES = 40  # a class of 35, the lecturer, a few second tabs
BURST = 2 * CLASS_PAGES * PAGE_REQUESTS  # requests one address may make at once: a class opening a link twice
RATE = 20.0  # requests a second one address may keep making: a class clicking along, one click each every 2 s
MAX_ADDRESSES = 10_000  # buckets kept; past this the least recently used goes (a fresh bucket is a full one)
QUEUE_PREFIXES = ("/gradio_api/queue/", "/gradio_api/heartbeat/")  # the queue's own protocol: its size bounds it
JOIN = "/gradio_api/queue/join"  # ... but a place in the queue is asked for with a counted request
STATIC_PREFIXES = ("/assets/", "/static/", "/svelte/", "/favicon.ico")  # Gradio's frontend, files a browser caches
TOO_MANY = "SpecLab: too many requests from your address at once; please try again in {s} s."
MAX_FORM_BYTES = 4096  # a posted form of the app's own (a key, a class's code and size): the rest is not read


# Where a hosting platform's own proxies sit: the private networks (a visitor's address is a public one)
PRIVATE_NETWORKS = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,127.0.0.0/8,fc00::/7,::1"


def trust_private_proxies() -> None:
    """Have the HTTP server take the visitor's address from X-Forwarded-For when the connection comes from a
    private network (uvicorn's FORWARDED_ALLOW_IPS, unless the operator set it), as behind a Space's proxy: the
    last entry not added by such a proxy, so a visitor cannot name another address by sending the header."""
    os.environ.setdefault("FORWARDED_ALLOW_IPS", PRIVATE_NETWORKS)


def address_length(scope: dict) -> int:
    """The characters the request's address takes: path, query and their separator."""
    return len(scope.get("raw_path") or scope.get("path", "").encode()) + 1 + len(scope.get("query_string", b""))


def client_address(scope: dict) -> str:
    """The visitor's address as the HTTP server resolved it (X-Forwarded-For honoured from trusted proxies only)."""
    client = scope.get("client")
    return client[0] if client else ""


def counted(scope: dict) -> bool:
    """Whether the request bypasses the queue or asks to join it, and is not one of the frontend's static files."""
    path = scope.get("path", "")
    return scope["type"] == "http" and (path == JOIN or not path.startswith(QUEUE_PREFIXES)) \
        and not path.startswith(STATIC_PREFIXES)


async def answer(send, status: int, text: str, retry_after_s: int | None = None, as_json: bool = False) -> None:
    """One line of the app's, as plain text, or as the JSON Gradio's page reads an error from ("detail", "error")."""
    body = (json.dumps({"detail": text, "error": text}) if as_json else text + "\n").encode()
    headers = [(b"content-type", b"application/json" if as_json else b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode())]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(retry_after_s).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def html_page(send, status: int, body: str, cookies: tuple[str, ...] | list[str] = ()) -> None:
    """A whole HTML page of the app's own (the presenter's and the class's forms), never cached, setting `cookies`."""
    data = body.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(data)).encode()),
                            (b"cache-control", b"no-store"), *((b"set-cookie", c.encode()) for c in cookies)]})
    await send({"type": "http.response.body", "body": data})


async def read_form(receive) -> dict[str, str]:
    """A posted form's fields (the presenter's key, a class's code), from its body's first MAX_FORM_BYTES."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES or not message.get("more_body"):
            break
    return dict(parse_qsl(body[:MAX_FORM_BYTES].decode("utf-8", "replace")))


async def see_other(send, location: str, cookies: tuple[str, ...] | list[str] = ()) -> None:
    """HTTP 303 to `location` (after a form was posted), setting `cookies`."""
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode()), *((b"set-cookie", c.encode()) for c in cookies),
                            (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


class LongAddressGuard:
    """Answers HTTP 414 with MESSAGE to a request whose address is longer than `limit`; passes the rest on."""

    def __init__(self, app, limit: int = MAX_ADDRESS_CHARS - 1024):  # room for the scheme, host and port
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or address_length(scope) <= self.limit:
            return await self.app(scope, receive, send)
        await send({"type": "http.response.start", "status": 414,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(MESSAGE)).encode())]})
        await send({"type": "http.response.body", "body": MESSAGE})


class TokenBuckets:
    """A token bucket per key: `burst` tokens, refilled at `rate` a second; at most `capacity` keys kept."""

    def __init__(self, burst: float = BURST, rate: float = RATE, capacity: int = MAX_ADDRESSES, clock=time.monotonic):
        self.burst, self.rate, self.capacity, self.clock = burst, rate, capacity, clock
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, when counted)

    def peek(self, key: str) -> float:
        """The seconds until `key` has a token (0: it has one now), taking none."""
        tokens, then = self.buckets.get(key, (self.burst, self.clock()))
        tokens = min(self.burst, tokens + (self.clock() - then) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> float:
        """Take one token for `key`: 0 when there was one, else the seconds until there is."""
        now = self.clock()
        tokens, then = self.buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        wait_s = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self.buckets[key] = (tokens - 1 if wait_s == 0 else tokens, now)
        while len(self.buckets) > self.capacity:
            self.buckets.popitem(last=False)
        return wait_s


class VisitorLimit:
    """Answers HTTP 429 (TOO_MANY, Retry-After) to a client address past its bucket of counted requests."""

    def __init__(self, app, buckets: TokenBuckets | None = None, key=client_address):
        self.app, self.buckets = app, buckets or TokenBuckets()
        self.key = key  # scope -> whose bucket: the address, or a class member's own (app/hosting/classroom.py)

    async def __call__(self, scope, receive, send):
        if not counted(scope):
            return await self.app(scope, receive, send)
        wait_s = self.buckets.take(self.key(scope))
        if wait_s == 0:
            return await self.app(scope, receive, send)
        retry = max(1, math.ceil(wait_s))
        await answer(send, 429, TOO_MANY.format(s=retry), retry, as_json=scope["path"].startswith("/gradio_api/"))


def expected_wait_s(queue, default_job_s: float = 15.0, job_s=None) -> float:
    """The seconds a run joining `queue` (Gradio's) would wait: each waiting job's estimated duration (`job_s(event)`,
    a comparison's from its settings; else its function's mean duration so far, default_job_s before one has run),
    summed, and what is left of the running ones by the same estimates; jobs asking one function the same thing
    count once (a class pressing one "Run it live" waits for one measurement: the app computes it once for all of
    them). The engine runs one job at a time, so the sum is the wait."""

    def duration(event) -> float:
        estimated = job_s(event) if job_s is not None else None
        if estimated is not None:
            return estimated
        fn = event.fn
        return queue.process_time_per_fn[fn].avg_time if fn in queue.process_time_per_fn else default_job_s

    waiting = {(event.fn, repr(getattr(event.data, "data", None))): event
               for events in queue.event_queue_per_concurrency_id.values() for event in events.queue}
    running = [event for jobs in getattr(queue, "active_jobs", ()) if jobs for event in jobs
               if event.concurrency_id == "engine"]
    engine = queue.event_queue_per_concurrency_id.get("engine")
    started = getattr(engine, "start_times_per_fn", {})
    now = time.time()  # Gradio's start times are wall-clock times
    left = sum(max(0.0, duration(event) - (now - min(started.get(event.fn) or {now}))) for event in running)
    return left + sum(duration(event) for event in waiting.values())


def full_queue_words(wait_s: float) -> str:
    """The app's line for a full queue, with the wait rounded up (to 5 s, at least 5, or to minutes past two)."""
    wait = f"{max(5, math.ceil(wait_s / 5) * 5):.0f} s" if wait_s < 120 else f"{math.ceil(wait_s / 60):.0f} minutes"
    return (f"SpecLab is busy: every place in the queue of runs is taken, and the runs waiting need about {wait}; "
            "please try again then.")


class FullQueueWords:
    """Answers a run refused by Gradio's full queue with HTTP 429, the app's words and the expected wait.
    `blocks`: the launched Blocks (their queue)."""

    JOIN = "/gradio_api/queue/join"
    GRADIO_FULL = "Queue is full."  # how Gradio's refusal begins (gradio/queueing.py; tests/app/test_page.py checks it)

    def __init__(self, app, blocks, job_s=None):
        self.app, self.blocks, self.job_s = app, blocks, job_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") != self.JOIN:
            return await self.app(scope, receive, send)
        held: list[dict] = []

        async def hold_refusal(message):
            """Pass every answer on but a 503, held until its body says whether it is Gradio's full queue."""
            if held or (message["type"] == "http.response.start" and message["status"] == 503):
                held.append(message)
            else:
                await send(message)

        await self.app(scope, receive, hold_refusal)
        if not held:
            return
        body = b"".join(m.get("body", b"") for m in held[1:])
        try:
            full = str(json.loads(body).get("detail", "")).startswith(self.GRADIO_FULL)
        except (ValueError, AttributeError):
            full = False
        if not full:
            for message in held:
                await send(message)
            return
        wait_s = expected_wait_s(self.blocks._queue, job_s=self.job_s)
        await answer(send, 429, full_queue_words(wait_s), max(1, math.ceil(wait_s)), as_json=True)
