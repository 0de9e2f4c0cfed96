"""Server lanes: read what a vLLM or SGLang server reports about its own speculative decoding.

The operator names the servers (`python -m app --server NAME=URL`, repeatable, or SPECLAB_SERVERS); a
visitor never does: no URL ever comes from a page or a link. Each server gets the comparison's prompt,
streamed, and its lane shows only what the server's answer says (docs/servers.md lists every field):

- vLLM, `POST /v1/completions` streamed with `stream_options.include_usage`: the text chunks, then a final
  chunk with `usage` and, when the server runs with `--per-request-spec-decode-metrics summary|detailed`,
  `metrics.speculative_decoding` (the acceptance histogram, counts, and in detailed mode the accepted
  count of every step); with `--enable-per-request-metrics` also the server's own timing in `metrics`.
- SGLang, its native `POST /generate` streamed: each chunk's `meta_info` (the last one carries
  `spec_verify_ct`, the accepted and proposed draft counts and the acceptance histogram).
- `GET /metrics` (About tab): vLLM's server-wide `vllm:spec_decode_*` counters, SGLang's gauges.

Standard library only. Every failure (refused connection, timeout, an HTTP error, an answer that is not
the documented shape) becomes one line in the lane, never an exception; nothing is retried. An API key
comes from the environment only and is never shown, logged or written into a comparison.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..run.events import ServerLaneEvent
from ..run.runner import apply_server

KINDS = ("auto", "vllm", "sglang")
ENV_SERVERS = "SPECLAB_SERVERS"  # NAME=URL entries separated by spaces or ";"
ENV_KEY = "SPECLAB_SERVER_KEY"  # the API key for every server; SPECLAB_SERVER_KEY_<NAME> for one server
CONNECT_TIMEOUT_S = 3.0  # a server that does not accept the connection by then is down
READ_TIMEOUT_S = 30.0  # longest silence between two chunks of an answer
TOTAL_TIMEOUT_S = 120.0  # longest a whole answer may take
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # an answer larger than this is cut off with a message
MAX_LINE_BYTES = 1024 * 1024
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")


class ServerError(Exception):
    """One line saying what went wrong with a server (shown in its lane as it is)."""


# --- naming the servers ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServerSpec:
    """One server the operator named."""

    name: str  # the lane's title (letters, digits, _ and -)
    url: str  # base address, e.g. http://127.0.0.1:8000 (no path for the API; no credentials in it)
    kind: str = "auto"  # vllm, sglang, or auto: asked from the server's /v1/models
    model: str | None = None  # the model id sent to vLLM; None: the server's default


def parse_server(text: str) -> ServerSpec:
    """`NAME=URL[,kind=vllm|sglang][,model=ID]` as a ServerSpec; ValueError with one line when malformed."""
    name, sep, rest = text.strip().partition("=")
    if not sep or not _NAME_RE.match(name):
        raise ValueError(f"a server is NAME=URL with a short NAME of letters and digits, got {text!r:.80}")
    url, *options = rest.split(",")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"server {name}: the address must start with http:// or https://, got {url!r:.80}")
    if parts.username or parts.password:
        raise ValueError(f"server {name}: put no credentials in the address; the key comes from {ENV_KEY}")
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"server {name}: bad port in {url!r:.80}") from None
    extra = {}
    for option in options:
        key, _, value = option.partition("=")
        if key not in ("kind", "model") or not value:
            raise ValueError(f"server {name}: unknown option {option!r:.40} (kind=…, model=…)")
        extra[key] = value
    if extra.get("kind", "auto") not in KINDS:
        raise ValueError(f"server {name}: kind must be one of {', '.join(KINDS)}")
    return ServerSpec(name, url.rstrip("/"), extra.get("kind", "auto"), extra.get("model"))


def servers_from(flags: list[str] | None, environ: Mapping[str, str] | None = None) -> list[ServerSpec]:
    """The servers named by `--server` flags and SPECLAB_SERVERS; ValueError on a bad or repeated name."""
    environ = os.environ if environ is None else environ
    entries = [*(flags or []), *re.split(r"[;\s]+", environ.get(ENV_SERVERS, "").strip())]
    specs = [parse_server(e) for e in entries if e]
    names = [s.name for s in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"server names must differ; repeated: {', '.join(repeated)}")
    return specs


def api_key(spec: ServerSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The server's key from the environment: SPECLAB_SERVER_KEY_<NAME> (upper case, - as _) first."""
    environ = os.environ if environ is None else environ
    own = f"{ENV_KEY}_{re.sub(r'[^A-Z0-9]', '_', spec.name.upper())}"
    return environ.get(own) or environ.get(ENV_KEY) or None


# --- what a server reports ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpecFigures:
    """A request's speculative decoding as the server counted it. histogram[j]: verify steps that accepted
    exactly j drafted tokens (the bonus token not counted)."""

    num_steps: int
    num_accepted: int
    num_drafted: int | None  # drafted tokens sent to the target; None when the server does not say
    histogram: tuple[int, ...] | None
    per_step_accepted: tuple[int, ...] | None  # vLLM's detailed mode: accepted count of every step, in order
    per_step_drafted: tuple[int, ...] | None
    reported_tau: float | None  # the server's own mean acceptance length field
    reported_rate: float | None  # the server's own acceptance rate field

    @property
    def tau(self) -> float | None:
        """Mean tokens committed per verify step: accepted drafts + the bonus token."""
        return 1.0 + self.num_accepted / self.num_steps if self.num_steps else None

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted drafted tokens / drafted tokens sent to the target."""
        if self.num_drafted:
            return self.num_accepted / self.num_drafted
        return self.reported_rate

    @property
    def per_position(self) -> list[float]:
        """Position i's acceptance (1-based): the share of steps that accepted at least i drafts."""
        if not self.histogram or not self.num_steps:
            return []
        return [sum(self.histogram[i:]) / self.num_steps for i in range(1, len(self.histogram))]


@dataclass
class ServerLaneResult:
    """One server lane: what its answer said so far. Plain values; no URL and no key."""

    name: str
    kind: str
    state: str = "waiting"  # waiting, running, done, stopped, error
    text: str = ""
    num_tokens: int | None = None  # generated tokens, as the server counted them
    ttft_s: float | None = None  # time to first token
    tpot_s: float | None = None  # time per output token after the first
    tokens_per_s: float | None = None
    timing_from: str = "client"  # "server": the server's own per-request timing; "client": measured here
    spec: SpecFigures | None = None
    error: str | None = None  # one line: why the lane has no answer
    note: str | None = None  # one line: what the answer lacked (e.g. no speculative-decoding figures)


# --- reading the documented shapes -------------------------------------------------------------------

def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ServerError(f"its {what} is not a count ({value!r:.40})")
    return value


def _counts(values, what: str) -> tuple[int, ...]:
    if isinstance(values, Mapping):  # a sparse {"j": count} histogram
        try:
            dense = {int(k): v for k, v in values.items()}
        except ValueError:
            raise ServerError(f"its {what} has a key that is not a number") from None
        if any(k < 0 or k > 4096 for k in dense):
            raise ServerError(f"its {what} has an impossible key")
        values = [dense.get(j, 0) for j in range(max(dense, default=-1) + 1)]
    if not isinstance(values, list):
        raise ServerError(f"its {what} is not a list")
    return tuple(_count(v, what) for v in values)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def vllm_figures(block: Mapping) -> SpecFigures:
    """vLLM's `metrics.speculative_decoding`: the histogram and counts, checked against each other."""
    if not isinstance(block, Mapping):
        raise ServerError("its metrics.speculative_decoding is not an object")
    histogram = _counts(block.get("acceptance_histogram"), "acceptance_histogram")
    steps = _count(block.get("num_spec_steps", sum(histogram)), "num_spec_steps")
    accepted = _count(block.get("num_accepted_draft_tokens", 0), "num_accepted_draft_tokens")
    drafted = _count(block.get("num_draft_tokens", 0), "num_draft_tokens")
    per_step = [(_counts(block[k], k) if block.get(k) is not None else None)
                for k in ("per_step_accepted", "per_step_drafted")]
    if steps != sum(histogram) or accepted != sum(j * c for j, c in enumerate(histogram)) or accepted > drafted:
        raise ServerError("its speculative-decoding counts disagree with its acceptance histogram")
    if per_step[0] is not None and (len(per_step[0]) != steps or sum(per_step[0]) != accepted):
        raise ServerError("its per_step_accepted disagrees with its counts")
    return SpecFigures(steps, accepted, drafted, histogram, per_step[0], per_step[1],
                       _number(block.get("mean_acceptance_length")), _number(block.get("draft_acceptance_rate")))


def _first(meta: Mapping, *names):
    return next((meta[n] for n in names if meta.get(n) is not None), None)


def sglang_figures(meta: Mapping) -> SpecFigures | None:
    """SGLang's `meta_info` spec fields (current names first, then the older aliases); None when absent."""
    steps = meta.get("spec_verify_ct")
    if not steps:
        return None
    steps = _count(steps, "spec_verify_ct")
    raw = _first(meta, "spec_correct_drafts_histogram", "spec_accept_histogram")
    histogram = _counts(raw, "spec_accept_histogram") if raw is not None else None
    accepted = _first(meta, "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
    drafted = _first(meta, "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
    if accepted is None and histogram is not None:
        accepted = sum(j * c for j, c in enumerate(histogram))
    if accepted is None:
        raise ServerError("it reports spec_verify_ct but no accepted-draft count")
    accepted = _count(accepted, "accepted-draft count")
    drafted = _count(drafted, "proposed-draft count") if drafted is not None else None
    if histogram is not None and (sum(histogram) != steps or sum(j * c for j, c in enumerate(histogram)) != accepted):
        raise ServerError("its speculative-decoding counts disagree with its acceptance histogram")
    return SpecFigures(steps, accepted, drafted, histogram, None, None,
                       _number(meta.get("spec_accept_length")), _number(meta.get("spec_accept_rate")))


# --- the HTTP client ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Timeouts:
    connect_s: float = CONNECT_TIMEOUT_S
    read_s: float = READ_TIMEOUT_S
    total_s: float = TOTAL_TIMEOUT_S


def _connection(spec: ServerSpec, timeout_s: float) -> http.client.HTTPConnection:
    parts = urlsplit(spec.url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout_s)


def _headers(spec: ServerSpec, environ: Mapping[str, str] | None) -> dict:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
    key = api_key(spec, environ)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _why(exc: BaseException, timeouts: Timeouts) -> str:
    """A failure in words (never the address's secrets: the URL has none, and the key is not in any error)."""
    if isinstance(exc, ServerError):
        return str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return "is not answering (connection refused): is it running?"
    if isinstance(exc, TimeoutError):
        return (f"did not answer in time (connecting: {timeouts.connect_s:g} s, "
                f"waiting for the next part: {timeouts.read_s:g} s)")
    if isinstance(exc, (http.client.HTTPException, ConnectionError)):
        return f"broke off the answer ({type(exc).__name__})"
    return f"could not be reached ({type(exc).__name__}: {str(exc)[:80]})"


def _open(spec: ServerSpec, method: str, path: str, body: dict | None, timeouts: Timeouts,
          environ: Mapping[str, str] | None) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """Send one request; the response when its status is 200, else ServerError with the status."""
    conn = _connection(spec, timeouts.connect_s)
    try:
        conn.connect()
        conn.sock.settimeout(timeouts.read_s)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, urlsplit(spec.url).path + path, body=data, headers=_headers(spec, environ))
        response = conn.getresponse()
        if response.status != 200:
            detail = response.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
            raise ServerError(f"answered HTTP {response.status} to {path}: {detail[:160]}")
        return conn, response
    except BaseException:
        conn.close()
        raise


def get_json(spec: ServerSpec, path: str, timeouts: Timeouts = Timeouts(), environ=None):
    conn, response = _open(spec, "GET", path, None, timeouts, environ)
    with closing(conn):
        return _parse_json(response.read(MAX_ANSWER_BYTES), path)


def get_text(spec: ServerSpec, path: str, timeouts: Timeouts = Timeouts(), environ=None) -> str:
    conn, response = _open(spec, "GET", path, None, timeouts, environ)
    with closing(conn):
        return response.read(MAX_ANSWER_BYTES).decode("utf-8", "replace")


def _parse_json(data: bytes | str, where: str):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        shown = (data[:40].decode("utf-8", "replace") if isinstance(data, bytes) else data[:40]).strip()
        raise ServerError(f"answered something that is not JSON on {where}: {shown!r}") from None


def sse_events(response, deadline: float, stop: threading.Event | None = None) -> Iterator[dict]:
    """The JSON objects of a server-sent-event stream's `data:` lines, until `[DONE]` or the stream ends."""
    total = 0
    while True:
        if time.monotonic() > deadline:
            raise ServerError("took longer than the time one answer may take; stopped reading")
        if stop is not None and stop.is_set():
            return
        line = response.readline(MAX_LINE_BYTES)
        if not line:
            return
        total += len(line)
        if total > MAX_ANSWER_BYTES:
            raise ServerError(f"sent more than {MAX_ANSWER_BYTES // 2**20} MiB; stopped reading")
        line = line.strip()
        if not line.startswith(b"data:"):
            continue  # comments, event names, keep-alives, the blank line between events
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return
        event = _parse_json(payload, "its stream")
        if not isinstance(event, dict):
            raise ServerError("sent a stream event that is not a JSON object")
        yield event


# --- one lane: a streamed request -----------------------------------------------------------------------

def detect_kind(spec: ServerSpec, timeouts: Timeouts, environ=None) -> tuple[str, str | None]:
    """(kind, model) for an `auto` server: its /v1/models says who serves it (`owned_by`) and the model."""
    models = get_json(spec, "/v1/models", timeouts, environ)
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise ServerError("its /v1/models lists no model")
    owner = str(data[0].get("owned_by", "")).lower()
    return ("sglang" if "sglang" in owner else "vllm"), spec.model or data[0].get("id")


@dataclass
class _Clock:
    """Client-side timing of one streamed answer."""

    start: float = field(default_factory=time.monotonic)
    first: float | None = None
    last: float | None = None

    def saw_text(self):
        now = time.monotonic()
        self.first = self.first or now
        self.last = now


def client_timing(clock: _Clock, num_tokens: int | None) -> dict:
    """TTFT, time per output token and tokens/s as measured here (network included)."""
    if clock.first is None or not num_tokens:
        return {}
    end = clock.last or clock.first
    tpot = (end - clock.first) / (num_tokens - 1) if num_tokens > 1 else None
    return dict(ttft_s=clock.first - clock.start, tpot_s=tpot,
                tokens_per_s=num_tokens / (end - clock.start) if end > clock.start else None)


def vllm_server_timing(metrics: Mapping, num_tokens: int | None) -> dict:
    """vLLM's per-request timing (`--enable-per-request-metrics`), when its answer carries it."""
    ttft_ms, itl_ms, rate = (_number(metrics.get(k)) for k in ("time_to_first_token_ms", "mean_itl_ms",
                                                                "tokens_per_second"))
    if ttft_ms is None or rate is None:
        return {}
    return dict(ttft_s=ttft_ms / 1e3, tpot_s=None if itl_ms is None else itl_ms / 1e3, tokens_per_s=rate,
                timing_from="server")


NO_VLLM_FIGURES = ("its answer has no speculative-decoding figures: start vLLM with a --speculative-config and "
                   "--per-request-spec-decode-metrics detailed (or summary)")
NO_SGLANG_FIGURES = ("its answer has no speculative-decoding figures: start SGLang with --speculative-algorithm "
                     "(DFLASH, EAGLE3, …); its /generate reports them in meta_info")


def _vllm_events(spec, model, prompt, settings, timeouts, environ, stop) -> Iterator[dict]:
    """The answer's text so far after every piece ({"text": ...}); returns its last figures."""
    body = {"prompt": prompt, "max_tokens": settings["max_new_tokens"], "temperature": settings["temperature"],
            "stream": True, "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    if settings["temperature"] > 0 and settings.get("seed") is not None:
        body["seed"] = settings["seed"] % 2**63
    conn, response = _open(spec, "POST", "/v1/completions", body, timeouts, environ)
    clock, final, text = _Clock(), None, ""
    with closing(conn):
        for event in sse_events(response, time.monotonic() + timeouts.total_s, stop):
            choices = event.get("choices") or []
            piece = choices[0].get("text") if choices and isinstance(choices[0], dict) else None
            if isinstance(piece, str) and piece:
                text += piece
                clock.saw_text()
                yield {"text": text}
            if event.get("usage"):
                final = event
    if final is None:
        raise ServerError("its stream ended without the usage chunk (stream_options.include_usage)")
    usage = final["usage"] if isinstance(final["usage"], dict) else {}
    tokens = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None
    metrics = final.get("metrics") if isinstance(final.get("metrics"), dict) else {}
    block = metrics.get("speculative_decoding")
    return {"num_tokens": tokens, **(vllm_server_timing(metrics, tokens) or client_timing(clock, tokens)),
            **({"note": NO_VLLM_FIGURES} if block is None else {"spec": vllm_figures(block)})}


def _sglang_events(spec, prompt, settings, timeouts, environ, stop) -> Iterator[dict]:
    """The answer's text so far after every piece ({"text": ...}); returns its last figures."""
    body = {"text": prompt, "stream": True,
            "sampling_params": {"max_new_tokens": settings["max_new_tokens"], "temperature": settings["temperature"]}}
    conn, response = _open(spec, "POST", "/generate", body, timeouts, environ)
    clock, meta, so_far = _Clock(), None, ""
    with closing(conn):
        for event in sse_events(response, time.monotonic() + timeouts.total_s, stop):
            text = event.get("text")
            if isinstance(text, str) and text:
                # SGLang streams the whole text so far (or, with --incremental-streaming-output, the new part)
                so_far = text if text.startswith(so_far) else so_far + text
                clock.saw_text()
                yield {"text": so_far}
            if isinstance(event.get("meta_info"), dict):
                meta = event["meta_info"]
    if meta is None:
        raise ServerError("its /generate stream carried no meta_info")
    tokens = meta.get("completion_tokens")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    figures = sglang_figures(meta)
    return {"num_tokens": tokens, **client_timing(clock, tokens), "spec": figures,
            **({"note": NO_SGLANG_FIGURES} if figures is None else {})}


def lane_events(spec: ServerSpec, prompt: str, settings: Mapping, stop: threading.Event | None = None,
                timeouts: Timeouts = Timeouts(), environ: Mapping[str, str] | None = None,
                index: int = 0) -> Iterator[ServerLaneEvent]:
    """Ask one server for the prompt, streamed, and say what its lane `index` became as events (app/run/events.py):
    "running", then after every new piece of text, then once at the end (done, stopped or error with one line).
    A transport: it changes no lane. Never raises for anything the server does."""
    yield ServerLaneEvent(index, (("state", "running"),))
    try:
        kind, model = spec.kind, spec.model
        if kind == "auto":
            kind, model = detect_kind(spec, timeouts, environ)
        pending = {"kind": kind}  # said with the next event
        events = (_sglang_events(spec, prompt, settings, timeouts, environ, stop) if kind == "sglang"
                  else _vllm_events(spec, model, prompt, settings, timeouts, environ, stop))
        while True:
            try:
                changes = next(events)
            except StopIteration as end:
                pending.update(end.value or {})
                break
            yield ServerLaneEvent(index, tuple({**pending, **changes}.items()))
            pending = {}
        pending["state"] = "stopped" if stop is not None and stop.is_set() else "done"
    except Exception as exc:  # noqa: BLE001 (every failure of a remote server is one line, never a traceback)
        pending = {"state": "error", "error": _why(exc, timeouts)}
    yield ServerLaneEvent(index, tuple(pending.items()))


def stream_lane(spec: ServerSpec, prompt: str, settings: Mapping, stop: threading.Event | None = None,
                timeouts: Timeouts = Timeouts(), environ: Mapping[str, str] | None = None
                ) -> Iterator[ServerLaneResult]:
    """Ask one server for the prompt, streamed; yield the lane after every event of `lane_events` (each a new
    value: app/run/runner.py's apply_server makes it). settings: temperature, max_new_tokens, seed."""
    lane = ServerLaneResult(spec.name, spec.kind)
    for event in lane_events(spec, prompt, settings, stop, timeouts, environ):
        lane = apply_server(lane, event)
        yield lane


class ServerRun:
    """Every server asked at once, one thread each (they wait on the network, not on the CPU). `lanes` holds
    each server's latest result, which the threads replace as answers arrive; `stop` ends them all."""

    def __init__(self, specs: list[ServerSpec], prompt: str, settings: Mapping, timeouts: Timeouts = Timeouts(),
                 environ: Mapping[str, str] | None = None):
        self.stop = threading.Event()
        self.lanes = [ServerLaneResult(s.name, s.kind) for s in specs]
        self.threads = [threading.Thread(target=self._follow, args=(i, s, prompt, settings, timeouts, environ),
                                         daemon=True, name=f"speclab-server-{s.name}") for i, s in enumerate(specs)]
        for thread in self.threads:
            thread.start()

    def _follow(self, i: int, spec: ServerSpec, prompt, settings, timeouts, environ):
        for lane in stream_lane(spec, prompt, settings, self.stop, timeouts, environ):
            self.lanes[i] = lane  # a new value each time: the reader never sees a lane half-updated

    def running(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def wait(self, timeout_s: float) -> None:
        """Wait until every server's answer ended, or timeout_s."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


# --- server-wide counters (/metrics) -------------------------------------------------------------------

_SAMPLE_RE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION_RE = re.compile(r'position="(\d+)"')


@dataclass(frozen=True)
class ServerCounters:
    """Server-wide speculative decoding since the server started (vLLM) or in its latest batch (SGLang)."""

    kind: str
    num_drafts: float | None = None
    num_draft_tokens: float | None = None
    num_accepted: float | None = None
    accepted_per_pos: tuple[float, ...] = ()
    drafted_per_pos: tuple[float, ...] = ()  # newer vLLM: draft tokens verified at each position
    accept_length: float | None = None  # SGLang's gauge
    accept_rate: float | None = None  # SGLang's gauge

    @property
    def tau(self) -> float | None:
        if self.num_drafts:
            return 1.0 + (self.num_accepted or 0.0) / self.num_drafts
        return self.accept_length

    @property
    def acceptance_rate(self) -> float | None:
        if self.num_draft_tokens:
            return (self.num_accepted or 0.0) / self.num_draft_tokens
        return self.accept_rate

    @property
    def per_position(self) -> list[float]:
        """Position i's acceptance over all traffic: accepted at i / drafts (or / drafted at i, when reported)."""
        if self.drafted_per_pos and len(self.drafted_per_pos) == len(self.accepted_per_pos):
            return [a / d if d else float("nan") for a, d in zip(self.accepted_per_pos, self.drafted_per_pos)]
        if not self.num_drafts:
            return []
        return [a / self.num_drafts for a in self.accepted_per_pos]


def prometheus_samples(text: str) -> list[tuple[str, str, float]]:
    """(name, labels, value) of every sample line of a Prometheus text exposition."""
    samples = []
    for line in text.splitlines():
        match = _SAMPLE_RE.match(line.strip())
        if match and not line.startswith("#"):
            try:
                samples.append((match.group(1), match.group(2) or "", float(match.group(3))))
            except ValueError:
                continue
    return samples


def _by_position(samples, name: str) -> tuple[float, ...]:
    positions: dict[int, float] = {}
    for sample_name, labels, value in samples:
        found = _POSITION_RE.search(labels)
        if sample_name == name and found:
            positions[int(found.group(1))] = positions.get(int(found.group(1)), 0.0) + value
    return tuple(positions.get(p, 0.0) for p in range(max(positions) + 1)) if positions else ()


def parse_counters(text: str) -> ServerCounters | None:
    """vLLM's `vllm:spec_decode_*_total` counters (summed over engines) or SGLang's `sglang:spec_accept_*`
    gauges; None when the exposition has neither."""
    samples = prometheus_samples(text)
    totals: dict[str, float] = {}
    for name, _, value in samples:
        totals[name] = totals.get(name, 0.0) + value
    if "vllm:spec_decode_num_drafts_total" in totals:
        return ServerCounters("vllm", totals["vllm:spec_decode_num_drafts_total"],
                              totals.get("vllm:spec_decode_num_draft_tokens_total"),
                              totals.get("vllm:spec_decode_num_accepted_tokens_total"),
                              _by_position(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total"),
                              _by_position(samples, "vllm:spec_decode_num_draft_tokens_per_pos_total"))
    if "sglang:spec_accept_length" in totals or "sglang:spec_accept_rate" in totals:
        gauges = {name: value for name, _, value in samples}  # one engine's gauge: the last sample
        return ServerCounters("sglang", accept_length=gauges.get("sglang:spec_accept_length"),
                              accept_rate=gauges.get("sglang:spec_accept_rate"))
    return None


NO_COUNTERS = ("no speculative-decoding counters on its /metrics (vLLM shows them once a --speculative-config is "
               "set; SGLang needs --enable-metrics)")


def read_counters(spec: ServerSpec, timeouts: Timeouts = Timeouts(), environ=None) -> ServerCounters | str:
    """The server's counters, or one line saying why there are none."""
    try:
        counters = parse_counters(get_text(spec, "/metrics", timeouts, environ))
    except Exception as exc:  # noqa: BLE001
        return _why(exc, timeouts)
    return counters if counters is not None else NO_COUNTERS
