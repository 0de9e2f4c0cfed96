"""The engine's queue, shared fairly: what a request to join it, or to read its answers, must be, and who goes first.

The engine runs one job at a time from Gradio's queue. `QueueDoor`, an ASGI middleware that `app.main.launch`
installs, reads every request that names one of the page's events (`fn_index`) before Gradio does:

- **Bad requests, one line each.** An event index that is not a whole number of the page's events, or one of the
  page's script-only events (they have no server half), is answered HTTP 400 in the app's words; Gradio would end
  the first in a bare HTTP 500 and a traceback. A request body over MAX_BODY_BYTES is refused (HTTP 413). An
  answer stream opened for a session with nothing pending is answered HTTP 404 in one line (Gradio's own answer
  logs two tracebacks).
- **A stated share of the queue.** One address holds at most PLACES_PER_ADDRESS of the queue's places (a class of
  35 and its lecturer behind a school's one address pressing one lesson point's "Run it live" fit), and at most
  JOBS_PER_ADDRESS distinct jobs among them (identical requests count once: the app computes them once), so one
  address flooding the queue leaves the other places to everyone else; past either it gets HTTP 429 and one line.
  A browser that entered an open class's code (app/hosting/classroom.py) is counted as a visitor of its own instead
  of by its address, its class holding at most max(its size, PLACES_PER_ADDRESS) places together.
- **A budget per run.** A comparison's engine time is estimated before it joins (app/run/runner.py `RunCosts`, from
  the engine's time per token as measured when it ran quietly: `quiet_costs`); one over the budget (JOB_BUDGET_S,
  the operator's `--job-budget`) is refused in one line naming the largest settings that fit. A presenter's runs
  are not limited.
- **The presenter first.** A browser that has entered the operator's presenter key (app/hosting/presenter.py)
  has its jobs taken out of the line into a lane of their own: each starts at once, and a visitor's comparison
  that is running lets it have the engine before its own next lane (a turn policy, app/run/runner.py `Turns`,
  handed in by app/main.py). That needs an engine that takes jobs from two threads one at a time (the engine's own
  process, engine/process.py); an engine in the server's process (a ZeroGPU Space) gets the presenter's jobs at the head of the line instead.
- **Stop withdraws at once.** A visitor's jobs still waiting are moved to a lane that starts them at once, where
  each handler sees the Stop and answers "withdrawn" without running anything (`withdraw`).

The queue's internals used here (Gradio 6: `Queue.event_queue_per_concurrency_id`, `EventQueue`, an `Event`'s
`concurrency_id`, `request`, `data`, `session_hash`, `Queue.pending_messages_per_session`, `delete_lock`) are
checked by tests/app/test_visitors.py on the installed Gradio, so an upgrade that moves them fails a test.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from urllib.parse import parse_qsl

from gradio.queueing import EventQueue

from .addresses import answer

JOIN = "/gradio_api/queue/join"
PREDICT = "/gradio_api/run/predict"
CALL = "/gradio_api/call/"  # the REST API: POST call/NAME (or call/v2/NAME) joins the queue for the event NAME
STREAMS = ("/gradio_api/queue/data", "/gradio_api/queue/data/stream")
MAX_BODY_BYTES = 1_000_000  # an event's body: its inputs (a prompt is at most 100,000 characters), never a file
PLACES_PER_ADDRESS = 40  # a class of 35, its lecturer, a few second tabs
JOBS_PER_ADDRESS = 8  # distinct jobs one address may have waiting
JOB_BUDGET_S = 15.0  # a visitor's comparison's estimated engine time, at most (the operator's --job-budget)
PRESENTER_LANE = "presenter"  # the presenter's jobs: started at once, one at a time
WITHDRAWN_LANE = "withdrawn"  # jobs whose session pressed Stop while they waited: started at once, they run nothing

NO_SUCH_NAME = "SpecLab: there is no API endpoint {name!r} on this page; /gradio_api/info lists them."
NOT_AN_EVENT = "SpecLab: there is no event {value} on this page; the page's events are numbered 0 to {last}."
SCRIPT_ONLY = "SpecLab: event {value} runs in the page itself and has nothing to run on the server."
NOT_JSON = "SpecLab: this request's body is not an event's JSON (data, fn_index, session_hash)."
TOO_BIG = f"SpecLab: this request's body is over {MAX_BODY_BYTES // 1_000_000} MB; an event's inputs are far smaller."
NO_STREAM = "SpecLab: nothing is waiting for this page; open it again to start."
CLASS_FULL = ("SpecLab: your class already has {n} runs waiting in the queue, the most a class of {size} may have "
              "({most} at once); please wait for one to finish.")
TOO_MANY_PLACES = ("SpecLab: your address already has {n} runs waiting in the queue, the most one address may have "
                   "({most} at once, {jobs} different ones); please wait for one to finish.")


def is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def event_address(event) -> str:
    client = getattr(getattr(event, "request", None), "client", None)
    return getattr(client, "host", "") or ""


def job_key(event) -> tuple:
    """What makes two waiting jobs the same job: the same function asked the same thing."""
    return event.fn, repr(getattr(event.data, "data", None))


def waiting_events(queue) -> list:
    return [event for lane in queue.event_queue_per_concurrency_id.values() for event in lane.queue]


def lane(queue, name: str, limit: int | None):
    """The queue's lane `name` (made on first use)."""
    lanes = queue.event_queue_per_concurrency_id
    if name not in lanes:
        lanes[name] = EventQueue(name, limit)
    return lanes[name]


def move(queue, event, name: str, limit: int | None, first: bool = False) -> bool:
    """Take a waiting event out of its lane into lane `name`; False when it no longer waits. Call on the server's
    loop, holding `queue.delete_lock`."""
    source = queue.event_queue_per_concurrency_id.get(event.concurrency_id)
    if source is None or event not in source.queue:
        return False
    source.queue.remove(event)
    target = lane(queue, name, limit)
    event.concurrency_id = name
    target.queue.insert(0, event) if first else target.queue.append(event)
    return True


class Door:
    """What the middleware and the handlers share: the launched Blocks, the server's loop once seen, the budget,
    the presenter check, and the sessions marked as presenters."""

    def __init__(self, blocks, budget_s: float = JOB_BUDGET_S, presenter: Callable[[dict], bool] | None = None,
                 estimate: Callable[[object, list, float], tuple[float, str] | None] | None = None,
                 own_lane: bool = True, classroom=None, at_once_limits=()):
        self.blocks, self.budget_s, self.own_lane = blocks, budget_s, own_lane
        self.classroom = classroom  # app/hosting/classroom.py: a class's members counted apart (None: by address)
        # (block function, scope, request) -> (status, line[, retry-after]) refusing an event answered at once
        # (not queued) before Gradio reads it, or None (app/hosting/toggles.py: a toggle past its limit)
        self.at_once_limits: list[Callable[[object, dict, dict], tuple | None]] = list(at_once_limits)
        self.arriving: list[tuple] = []  # joins let through and not yet queued: (identity, job, token)
        self.is_presenter = presenter or (lambda scope: False)
        self.estimate = estimate  # (block function, raw inputs, budget) -> (seconds, refusal line) or None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.presenters: set[str] = set()  # session hashes that joined with the key

    @property
    def queue(self):
        return self.blocks._queue

    def joining(self, scope: dict, fn, request: dict) -> tuple:
        """A join let through, counted against its share until Gradio has queued it (`joined`): joins arriving at
        once would otherwise each see the queue without the others."""
        entry = (self.scope_identity(scope), (fn, repr(request.get("data"))), object())
        self.arriving.append(entry)
        return entry

    def joined(self, entry: tuple) -> None:
        if entry in self.arriving:
            self.arriving.remove(entry)

    def scope_identity(self, scope: dict) -> str:
        """Who a request is for the queue's shares: its class member (a class code entered), else its address."""
        from .classroom import scope_identity

        return scope_identity(self.classroom)(scope)

    def event_identity(self, event) -> str:
        """Who a waiting job is for the queue's shares, as `scope_identity`."""
        from .classroom import event_cookie

        address = event_address(event)
        return address if self.classroom is None else self.classroom.identity(address, event_cookie(event))

    def withdraw(self, session: str, timeout_s: float = 1.0) -> int:
        """Move the session's waiting jobs to the withdrawn lane, where they start at once (each handler sees its
        Stop and runs nothing); from any thread. Returns how many were moved."""
        if self.loop is None or self.loop.is_closed():
            return 0

        async def work():
            async with self.queue.delete_lock:
                events = [e for e in waiting_events(self.queue)
                          if e.session_hash == session and e.concurrency_id != WITHDRAWN_LANE]
                return sum(move(self.queue, e, WITHDRAWN_LANE, None) for e in events)

        try:
            if _on_loop(self.loop):
                return 0  # never from the loop itself (the handlers that call this run in worker threads)
            return asyncio.run_coroutine_threadsafe(work(), self.loop).result(timeout_s)
        except Exception:  # noqa: BLE001 - the job then answers Stop at its turn, as it always could
            return 0

    def presenter_running(self) -> bool:
        """Whether a presenter's job waits or runs in its own lane."""
        presenting = self.queue.event_queue_per_concurrency_id.get(PRESENTER_LANE)
        return presenting is not None and (presenting.current_concurrency > 0 or bool(presenting.queue))


def _on_loop(loop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def read_body(receive, limit: int) -> bytes | None:
    """The request's whole body, or None past `limit` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


class QueueDoor:
    """ASGI middleware (module docstring). `door`: the shared Door."""

    def __init__(self, app, door: Door):
        self.app, self.door = app, door

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        self.door.loop = self.door.loop or asyncio.get_running_loop()
        path, method = scope.get("path", ""), scope.get("method")
        if method == "GET" and path in STREAMS:
            session = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("session_hash", "")
            if session not in self.door.queue.pending_messages_per_session:
                return await answer(send, 404, NO_STREAM, as_json=True)
            return await self.app(scope, receive, send)
        if method == "GET" and path.startswith(CALL) and path[len(CALL):].strip("/").count("/") >= 1:
            session = self.stream_session(path.rstrip("/").rsplit("/", 1)[-1])
            if session not in self.door.queue.pending_messages_per_session:
                return await answer(send, 404, NO_STREAM, as_json=True)
            return await self.app(scope, receive, send)
        calls = method == "POST" and path.startswith(CALL)
        if method != "POST" or (path not in (JOIN, PREDICT) and not calls):
            return await self.app(scope, receive, send)
        body = await read_body(receive, MAX_BODY_BYTES)
        if body is None:
            return await answer(send, 413, TOO_BIG, as_json=True)
        try:
            request = json.loads(body)
        except ValueError:
            return await answer(send, 400, NOT_JSON, as_json=True)
        if not isinstance(request, dict):
            return await answer(send, 400, NOT_JSON, as_json=True)
        refusal = self.check_call(request, scope, path) if calls else self.check(request, scope, path)
        if refusal is not None:
            return await answer(send, *refusal, as_json=True)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if path != JOIN or not self.door.is_presenter(scope):
            joining = self.door.joining(scope, self.event_fn(request, path), request) if path == JOIN or calls \
                else None
            try:  # until Gradio has put it in its queue, a join still counts against its share
                return await self.app(scope, replay, send)
            finally:
                if joining is not None:
                    self.door.joined(joining)
        answered: list[bytes] = []

        async def keep(message):
            if message["type"] == "http.response.body":
                answered.append(message.get("body", b""))
            await send(message)

        await self.app(scope, replay, keep)
        await self.first(b"".join(answered), request)

    def event_fn(self, request: dict, path: str):
        """The block function a join (fn_index) or a REST API call (call/NAME) names."""
        if path.startswith(CALL):
            name = path[len(CALL):].strip("/").removeprefix("v2/")
            return next((f for f in self.door.blocks.fns.values() if getattr(f, "api_name", None) == name), None)
        return self.door.blocks.fns.get(request.get("fn_index"))

    def stream_session(self, event_id: str) -> str:
        """The session whose messages a REST API call's answer stream reads (as Gradio finds it)."""
        queue = self.door.queue
        event = queue.event_ids_to_events.get(event_id)
        if event is not None:
            return event.session_hash
        return next((s for s, ids in getattr(queue, "pending_event_ids_session", {}).items() if event_id in ids),
                    event_id)

    def check_call(self, request: dict, scope: dict, path: str):
        """A REST API call (call/NAME): the event it names must exist; then as a place in the queue."""
        name = path[len(CALL):].strip("/").removeprefix("v2/")
        fn = next((f for f in self.door.blocks.fns.values() if getattr(f, "api_name", None) == name), None)
        if fn is None or "/" in name:
            return 404, NO_SUCH_NAME.format(name=name[:40])
        return self.place(fn, request.get("data"), scope)

    def check(self, request: dict, scope: dict, path: str) -> tuple[int, str] | tuple[int, str, int] | None:
        """Why this event may not go on, as (status, line[, retry-after]); None when it may."""
        fns = self.door.blocks.fns
        index = request.get("fn_index")
        last = max(fns, default=0)
        if index is None and path == JOIN:
            return None  # Gradio's own one line ("No function index provided.")
        if not is_whole(index) or index not in fns:
            return 400, NOT_AN_EVENT.format(value=json.dumps(index)[:40], last=last)
        fn = fns[index]
        if fn.fn is None:
            return 400, SCRIPT_ONLY.format(value=index)
        if path != JOIN:
            return next((refusal for limit in self.door.at_once_limits
                         if (refusal := limit(fn, scope, request)) is not None), None)
        return self.place(fn, request.get("data"), scope)

    def place(self, fn, data, scope: dict):
        """Whether the address may have one more place in the queue, and the job fits the budget."""
        if self.door.is_presenter(scope):
            return None
        door = self.door
        address = door.scope_identity(scope)
        mine = [e for e in waiting_events(door.queue) if door.event_identity(e) == address]
        arriving = [job for who, job, _ in door.arriving if who == address]  # let through, not yet queued
        places, jobs = len(mine) + len(arriving), {job_key(e) for e in mine} | set(arriving)
        if places >= PLACES_PER_ADDRESS or (len(jobs) >= JOBS_PER_ADDRESS and (fn, repr(data)) not in jobs):
            return 429, TOO_MANY_PLACES.format(n=places, most=PLACES_PER_ADDRESS, jobs=JOBS_PER_ADDRESS), 10
        classroom = door.classroom
        if classroom is not None and classroom.is_member(address):
            most = max(classroom.size, PLACES_PER_ADDRESS)
            held = sum(classroom.is_member(door.event_identity(e)) for e in waiting_events(door.queue))
            if held >= most:
                return 429, CLASS_FULL.format(n=held, size=classroom.size, most=most), 10
        if self.door.estimate is not None and isinstance(data, list):
            estimate = self.door.estimate(fn, data, self.door.budget_s)
            if estimate is not None and estimate[0] > self.door.budget_s:
                return 429, estimate[1], max(1, math.ceil(estimate[0]))
        return None

    async def first(self, answered: bytes, request: dict) -> None:
        """A presenter's job that joined: into the presenter's lane, where it starts at once."""
        try:
            event_id = json.loads(answered).get("event_id")
        except (ValueError, AttributeError):
            return
        queue = self.door.queue
        event = queue.event_ids_to_events.get(event_id) if event_id else None
        if event is None:
            return
        async with queue.delete_lock:
            if not self.door.own_lane:  # the head of its own line
                line = queue.event_queue_per_concurrency_id.get(event.concurrency_id)
                if line is not None and event in line.queue:
                    line.queue.remove(event)
                    line.queue.insert(0, event)
            elif move(queue, event, PRESENTER_LANE, 1, first=True):
                self.door.presenters.add(event.session_hash)


def counts_of(queue) -> Counter:
    """Places held per address (for the reliability script and the tests)."""
    return Counter(event_address(e) for e in waiting_events(queue))


def same_key(given: str, key: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), key.encode("utf-8", "surrogatepass"))


# --- a comparison's cost, before it joins -----------------------------------------------------------------

def comparison_lanes(fn, data: list) -> list[tuple[int, int]] | None:
    """The (new tokens, requests at once) of each lane a Run or a share link's run asks for; None for other events
    and for values the handler will refuse itself."""
    from ..links import parse_query
    from ..settings import PARSERS, RUN_INPUTS, SettingError

    at = {name: RUN_INPUTS.index(name) for name in ("methods", "max_new_tokens", "requests_at_once")}  # Run's inputs
    name = getattr(fn.fn, "__name__", "")
    try:
        if name == "on_run" and len(data) > max(at.values()):
            methods = PARSERS["methods"](data[at["methods"]])
            tokens = PARSERS["max_new_tokens"](data[at["max_new_tokens"]])
            requests = PARSERS["requests_at_once"](data[at["requests_at_once"]])
        elif name == "run_link" and data and isinstance(data[0], str) and data[0]:
            settings, _ = parse_query(parse_qsl(data[0][:MAX_BODY_BYTES], keep_blank_values=True))
            methods, tokens, requests = settings.methods, settings.max_new_tokens, settings.requests_at_once
        else:
            return None
    except (SettingError, ValueError, TypeError):
        return None
    return [(tokens, requests)] * len(methods)


def requests_words(n: int) -> str:
    """"1 request", "2 requests"."""
    return f"{n} request{'s' if n != 1 else ''}"


def over_budget_line(lanes: list[tuple[int, int]], costs, budget_s: float) -> tuple[float, str]:
    """The estimate of a comparison's live pass, and the one line refusing it with the largest settings that fit."""
    seconds = costs.live_s(lanes)
    n, (tokens, requests) = len(lanes), lanes[0]
    from ..settings import MAX_NEW_TOKENS_UI

    fits_here = min(MAX_NEW_TOKENS_UI, int((budget_s / n - costs.fixed_s(requests)) / costs.per_token_s(requests)))
    fits_alone = min(MAX_NEW_TOKENS_UI, int(budget_s / (n * costs.per_token_s(1))))
    other = f", or {fits_alone} at 1 request at once" if requests > 1 and fits_alone > fits_here else ""
    fits = (f"{n} lane{'s' if n != 1 else ''} of up to {fits_here} new tokens at {requests_words(requests)} at once"
            f"{other}" if fits_here >= 1 else f"{n} lanes of up to {fits_alone} new tokens at 1 request at once")
    return seconds, (f"SpecLab: this comparison would hold the shared engine about {math.ceil(seconds)} s ({n} "
                     f"lane{'s' if n != 1 else ''} × {tokens} new tokens × {requests_words(requests)} at once); one "
                     f"visitor's run may take at most {budget_s:.0f} s here, so that every visitor waits at most "
                     f"that long behind another's. What fits: {fits}, or fewer lanes.")


def within_the_defaults(lanes: list[tuple[int, int]]) -> bool:
    """Whether a comparison is no larger than the page's own defaults (no more lanes, no more new tokens, one request
    at once): the budget never refuses it, however slow a busy server made the costs it has learned."""
    from ..settings import default_settings

    defaults = default_settings()
    return len(lanes) <= len(defaults.methods) and all(
        tokens <= defaults.max_new_tokens and requests <= defaults.requests_at_once for tokens, requests in lanes)


def quiet_costs(learned):
    """The budget's costs: the engine's time per token as measured when it ran quietly, so that what a visitor may
    run does not move with other people's load. A live pass measured on a busy server is slower than its estimate;
    one on a quiet server is not. So of every pass `learned` (app/run/runner.py RunCosts) measures since the server
    started, these costs (a RunCosts of the same starting figures) keep the fastest, measured over estimated, for
    single requests and batches apart: the first run sets it, a quicker one lowers it, a slowed one never raises it.
    The queue's expected waits still use `learned`, which follows the load."""
    from ..run.runner import RunCosts

    quiet, observed = RunCosts(learned.token_s, learned.request_token_s, learned.batch_s), learned.observe
    fastest: dict[bool, float] = {}  # batched or not -> the fastest pass, measured over estimated

    def observe(lanes, measured_s: float) -> None:  # every pass `learned` hears of, the quiet costs hear of too
        observed(lanes, measured_s)
        estimated = sum(quiet._lane_s(tokens, requests) for tokens, requests in lanes)
        if estimated > 0 and measured_s > 0 and lanes:
            batched = max(requests for _, requests in lanes) > 1
            fastest[batched] = quiet.scale[batched] = min(fastest.get(batched, math.inf), measured_s / estimated)

    learned.observe = observe
    return quiet


def comparison_estimate(costs) -> Callable[[object, list, float], tuple[float, str] | None]:
    """The Door's estimate: a comparison's live pass at the engine's quiet costs (`quiet_costs` of the learned
    `costs`) and its refusal line at a budget; None for any other event and for a comparison within the page's
    defaults (`within_the_defaults`)."""
    quiet = quiet_costs(costs)

    def estimate(fn, data: list, budget_s: float):
        lanes = comparison_lanes(fn, data)
        return None if not lanes or within_the_defaults(lanes) else over_budget_line(lanes, quiet, budget_s)

    estimate.costs = quiet
    return estimate


LIVE_PRIOR_S = 12.0  # a Why measurement's engine time before one has been timed here (docs/benchmarks.md: 5-14 s)


def job_seconds(costs, live: Callable[[object, list], tuple[list, int] | None] | None = None
                ) -> Callable[[object], float | None]:
    """A waiting job's estimated engine time: a comparison's from its settings (its live pass and the repeats that
    fit); a lesson point's live comparison from the settings it runs (`live(fn, data)`: its lanes and timing runs);
    None for other jobs (their mean duration so far is used instead, LIVE_PRIOR_S before one has run)."""

    def seconds(event) -> float | None:
        data = getattr(getattr(event, "data", None), "data", None)
        lanes = comparison_lanes(event.fn, data) if isinstance(data, list) else None
        if lanes:
            return costs.total_s(lanes)
        point = live(event.fn, data if isinstance(data, list) else []) if live is not None else None
        return costs.total_s(*point) if point else None

    return seconds


# --- each waiting job told its place and expected start ---------------------------------------------------

def install_estimates(queue, job_s: Callable[[object], float | None], default_job_s: float = LIVE_PRIOR_S) -> None:
    """Have Gradio's queue tell each job waiting for the engine its place and when its result is expected from the
    estimated durations of the jobs ahead (`job_s`; else their function's mean so far), identical ones once, and
    what is left of the running one, instead of its function's mean duration times its place. Gradio sends these
    as a job joins and every second while it waits (the page shows them on the Compare tab's status line)."""
    from gradio.server_messages import EstimationMessage

    from .addresses import expected_wait_s

    original = queue.broadcast_estimations

    def duration(event) -> float:
        return job_duration(queue, event, job_s, default_job_s)

    def broadcast(concurrency_id, after=None):
        line = queue.event_queue_per_concurrency_id.get(concurrency_id)
        if concurrency_id != "engine" or line is None:
            return original(concurrency_id, after)
        ahead = expected_wait_s(SimpleQueue(queue, []), default_job_s, job_s)  # what is left of the running job
        counted: set = set()
        for rank, event in enumerate(list(line.queue)):
            own = duration(event)
            if after is None or rank >= after:
                queue.send_message(event, EstimationMessage(rank=rank, rank_eta=ahead + own,
                                                            queue_size=len(line.queue)))
            key = job_key(event)
            if key not in counted:
                counted.add(key)
                ahead += own

    queue.broadcast_estimations = broadcast


def job_duration(queue, event, job_s: Callable[[object], float | None], default_job_s: float = LIVE_PRIOR_S) -> float:
    """A waiting job's expected engine time: its estimate (`job_s`), else its function's mean duration so far, else
    `default_job_s`."""
    estimated = job_s(event)
    if estimated is not None:
        return estimated
    times = queue.process_time_per_fn.get(event.fn)
    return times.avg_time if times is not None else default_job_s


# --- past a stated wait, the waiting visitor told where the run stands, in words ---------------------------

WAIT_WORDS_S = 60.0  # a run expected to start later than this is told so in words, with what it can do meanwhile


def place_of(queue, session: str, job_s: Callable[[object], float | None],
             default_job_s: float = LIVE_PRIOR_S) -> tuple[int, float]:
    """The place (1: next) of the session's last job waiting for the engine, and the seconds until it is expected
    to start: what is left of the running job and each job ahead (identical ones once). A session with no job
    waiting yet is placed last, as a job joining now would be."""
    from .addresses import expected_wait_s

    line = queue.event_queue_per_concurrency_id.get("engine")
    waiting = list(line.queue) if line is not None else []
    mine = max((i for i, event in enumerate(waiting) if event.session_hash == session), default=len(waiting))
    ahead, counted = expected_wait_s(SimpleQueue(queue, []), default_job_s, job_s), set()
    for event in waiting[:mine]:
        if (key := job_key(event)) not in counted:
            counted.add(key)
            ahead += job_duration(queue, event, job_s, default_job_s)
    return mine + 1, ahead


def waiting_note(place: int, wait_s: float, recorded_at: str | None, query: str, now_s: float | None = None
                 ) -> str | None:
    """Past WAIT_WORDS_S, where a run stands in the page's words (HTML): its place, when it should start (in UTC),
    and the recorded run of the same settings, opened at once in a new tab (`query`: its link's), when this server
    has one; else when to come back. None for a shorter wait (the queue's own figures say enough)."""
    import html
    from datetime import datetime, timezone

    if wait_s < WAIT_WORDS_S:
        return None
    at = datetime.fromtimestamp((time.time() if now_s is None else now_s) + wait_s, timezone.utc).strftime("%H:%M UTC")
    wait = f"{math.ceil(wait_s / 60):.0f} minutes" if wait_s >= 120 else f"{math.ceil(wait_s / 10) * 10:.0f} s"
    line = (f"Your run is number {place} in line for the shared engine and should start in about {wait} (about {at}: "
            "each run ahead is estimated from its settings).")
    if recorded_at:
        more = (f" This server recorded the same comparison on {html.escape(recorded_at)}: "
                f'<a href="?{html.escape(query)}" target="_blank" rel="noopener">open that recording in a new tab</a> '
                "now, and keep your place here.")
    else:
        more = (f" Keep this page open and it fills in when your run's turn comes; or press Stop and come back after "
                f"{at}.")
    return f'<div class="note" id="queue-words">{line}{more}</div>'


class SimpleQueue:
    """A view of Gradio's queue with other waiting jobs (expected_wait_s reads the running ones from it)."""

    def __init__(self, queue, waiting: list):
        self.active_jobs = queue.active_jobs
        self.process_time_per_fn = queue.process_time_per_fn
        engine = queue.event_queue_per_concurrency_id.get("engine")
        lane = EventQueue("engine", 1)
        lane.start_times_per_fn = getattr(engine, "start_times_per_fn", {})
        lane.queue = waiting
        self.event_queue_per_concurrency_id = {"engine": lane}
