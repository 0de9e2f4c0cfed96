"""What a visitor's page costs the server: Gradio's per-visitor state without its copy of the page's
configuration, and the page itself served from memory.

For each new browser session Gradio builds a `SessionState`, and that builds the configuration of every
block on the page (about 160 here: 12 ms and 0.3 MiB per visitor), then rebuilds a block's configuration
each time an event updates it. That copy serves one feature only, Gradio's deep links (a button this app
does not have), yet it was most of the server's work when a class opened one recorded link at once.

`install` makes the running server's sessions lean: the configuration copy stays empty, so a visitor costs
what the app itself does. Everything else Gradio keeps per session (state values, updated components) is
kept as before. It relies on two names inside Gradio (`StateHolder.session_data`, and the
`config_for_block` that `SessionState` calls on its `blocks_config`); tests/app/test_page.py checks both on the
installed Gradio, so an upgrade that moves them fails a test rather than slowing the server.

Gradio also builds the page (its HTML, with the whole configuration inside, about 0.35 MB) afresh for every
load, copying the configuration each time, and sends it uncompressed. `PageCache` builds it once per page
address, compresses it once and serves it from memory: docs/benchmarks.md measures the server's CPU time per
load both ways.
"""

from __future__ import annotations

import asyncio
import gzip
from collections import OrderedDict
from dataclasses import dataclass, field
from types import SimpleNamespace
from urllib.parse import parse_qsl

import brotli
from gradio.state_holder import SessionState, StateHolder


def _no_config(*args, **kwargs) -> dict:
    """A block's configuration as a lean session keeps it: not at all (an empty entry)."""
    return {}


class LeanSessionState(SessionState):
    """A SessionState whose copy of the page's configuration is never filled."""

    def __init__(self, blocks):
        # Gradio fills the copy for the blocks in `blocks.blocks`: none, here.
        super().__init__(SimpleNamespace(default_config=blocks.default_config, blocks={}))
        self.blocks_config.config_for_block = _no_config  # nor do the updates its events make


class LeanStateHolder(StateHolder):
    """Gradio's StateHolder, making lean sessions."""

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = LeanSessionState(self.blocks)
        return super().__getitem__(session_id)


def install(demo) -> None:
    """Make the launched app's new sessions lean. A page with `gr.render` needs the configuration (Gradio
    renders from it), so such a page is left as it is."""
    if demo.default_config.renderables:
        return
    demo.server_app.state_holder.__class__ = LeanStateHolder


# --- the page and its configuration, served from memory -------------------------------------------------

CACHED_PATHS = frozenset({"/", "/config", "/config/"})  # the page (its configuration inside) and the configuration
GRADIO_PAGE_PARAMS = frozenset({"page", "deep_link", "all_endpoints"})  # what Gradio builds them from, of a query
ROOT_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto", b"x-gradio-server")  # the page's own address
MAX_ANSWERS = 8  # distinct page addresses kept (one a host name the page is reached by)


def page_key(scope: dict) -> tuple | None:
    """What the answer to this request depends on, when it is the page or its configuration: its path and the
    address Gradio writes into the page (scheme, host, proxy headers, mount path). None for anything else, and
    for a query Gradio reads itself (a deep link, another page); the app's own link parameters (`?lesson=3`,
    `?prompt=...`) are read by the page's events, not by the page, so every link shares one answer."""
    if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in CACHED_PATHS:
        return None
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    if any(name in GRADIO_PAGE_PARAMS for name, _ in query):
        return None
    headers = tuple(b",".join(v for k, v in scope["headers"] if k == name) for name in ROOT_HEADERS)
    return scope["path"], scope.get("scheme"), scope.get("root_path", ""), scope.get("server"), headers


def accepted_encodings(scope: dict) -> set[str]:
    """The content codings the request accepts, by its Accept-Encoding ("gzip;q=0" refuses one)."""
    value = b",".join(v for k, v in scope["headers"] if k == b"accept-encoding").decode("latin-1")
    accepted = set()
    for part in value.split(","):
        name, _, params = part.partition(";")
        weight = params.replace(" ", "").lower().removeprefix("q=")
        try:
            refused = params and float(weight) == 0
        except ValueError:
            refused = False
        if name.strip() and not refused:
            accepted.add(name.strip().lower())
    return accepted


@dataclass
class Answer:
    """One page's answer as Gradio built it, and its compressed forms (made once)."""

    status: int
    headers: list[tuple[bytes, bytes]]  # Gradio's, less its length
    body: bytes
    compressed: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self):
        self.compressed = {"br": brotli.compress(self.body, quality=5), "gzip": gzip.compress(self.body, 6)}

    async def send(self, scope: dict, send) -> None:
        accepted = accepted_encodings(scope)
        encoding = next((e for e in ("br", "gzip") if e in accepted), None)
        body = self.compressed[encoding] if encoding else self.body
        headers = [*self.headers, (b"content-length", str(len(body)).encode()), (b"vary", b"accept-encoding")]
        if encoding:
            headers.append((b"content-encoding", encoding.encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class PageCache:
    """ASGI middleware: the page and its configuration, built by Gradio once per page address and served from
    memory (compressed once too), so a class reloading the page costs the server little. Built again when the
    Blocks' configuration is replaced (Gradio replaces it whole, never edits it in place); only complete answers
    (HTTP 200) are kept. `blocks`: the launched Blocks."""

    def __init__(self, app, blocks, capacity: int = MAX_ANSWERS):
        self.app, self.blocks, self.capacity = app, blocks, capacity
        self.answers: OrderedDict[tuple, Answer] = OrderedDict()
        self.config = None  # the configuration the answers were built from
        self.building = asyncio.Lock()  # one build at a time: a crowd arriving together waits for the first

    async def __call__(self, scope, receive, send):
        key = page_key(scope)
        if key is None:
            return await self.app(scope, receive, send)
        async with self.building:
            if self.blocks.config is not self.config:
                self.answers.clear()
                self.config = self.blocks.config
            answer = self.answers.get(key)
            if answer is None:
                answer = await self._build(scope, receive)
                if answer.status == 200:
                    self.answers[key] = answer
                    while len(self.answers) > self.capacity:
                        self.answers.popitem(last=False)
            else:
                self.answers.move_to_end(key)
        await answer.send(scope, send)

    async def _build(self, scope, receive) -> Answer:
        """Gradio's own answer to this request, kept whole."""
        start, body = {}, []

        async def keep(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))

        await self.app(scope, receive, keep)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        return Answer(start.get("status", 500), headers, b"".join(body))
