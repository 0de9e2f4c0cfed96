"""The engine's queue shared fairly, without a server: bad events answered in one line, each address's share of the
queue, the per-run budget, the presenter's lane, Stop withdrawing a waiting job, and the session store's bounds.
(tests/app/test_queue_served.py checks the same through a launched app.)"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("gradio")

from gradio.queueing import EventQueue  # noqa: E402

from app.run import runner  # noqa: E402
from app.hosting import fairness  # noqa: E402
from app.hosting.fairness import Door, QueueDoor  # noqa: E402
from app.hosting.presenter import COOKIE, Presenter, PresenterPage, token  # noqa: E402
from app.run.sessions import SessionStore  # noqa: E402
from test_visitors import Inner, request  # noqa: E402


def on_run(*args):  # named as the Compare tab's Run handler, which the budget reads
    return args


class Fn:
    """A block function as the door reads it: its Python function (None for one that runs in the page only)."""

    def __init__(self, fn, api_name=None):
        self.fn, self.api_name = fn, api_name


FNS = {0: Fn(on_run, "run"), 1: Fn(None), 2: Fn(lambda x: x, "echo")}


def fns() -> dict:
    return FNS


def event(fn, data, address: str = "203.0.113.5", session: str = "s", lane: str = "engine"):
    return SimpleNamespace(fn=fn, data=SimpleNamespace(data=data), request=SimpleNamespace(client=SimpleNamespace(
        host=address)), session_hash=session, concurrency_id=lane, _id=f"{session}-{id(data)}")


def blocks(*events, pending=()) -> SimpleNamespace:
    engine = EventQueue("engine", 1)
    engine.queue.extend(events)
    queue = SimpleNamespace(event_queue_per_concurrency_id={"engine": engine},
                            pending_messages_per_session=set(pending), pending_event_ids_session={},
                            event_ids_to_events={e._id: e for e in events}, delete_lock=asyncio.Lock())
    return SimpleNamespace(fns=fns(), _queue=queue)


def serve_body(app, scope: dict, body: bytes) -> tuple[int, bytes]:
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": body}

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def join(door: Door, fn_index, data=(), client: str = "203.0.113.5", path: str = fairness.JOIN, cookie: str = ""):
    headers = {"cookie": cookie} if cookie else {}
    body = json.dumps({"data": list(data), "fn_index": fn_index, "session_hash": "s"}).encode()
    return serve_body(QueueDoor(Inner(b'{"event_id": "x"}'), door), request(path, method="POST", client=client,
                                                                           headers=headers), body)


def one_line(body: bytes) -> str:
    text = json.loads(body)["error"]
    assert text.startswith("SpecLab:") and "\n" not in text, text
    return text


def test_an_event_that_does_not_exist_or_runs_only_in_the_page_is_answered_in_one_line():
    door = Door(blocks())
    for path in (fairness.JOIN, fairness.PREDICT):
        for index in (99, -1, True, 2.5, "0", [0], 10**30):
            status, body = join(door, index, path=path)
            assert status == 400 and "no event" in one_line(body), (index, path)
        status, body = join(door, 1, path=path)
        assert status == 400 and "runs in the page itself" in one_line(body)
        assert join(door, 2, ["x"], path=path)[0] == 200
    status, body = serve_body(QueueDoor(Inner(), door), request(fairness.JOIN, method="POST"), b"{not json")
    assert status == 400 and one_line(body)
    status, body = serve_body(QueueDoor(Inner(), door), request(fairness.JOIN, method="POST"),
                              b"x" * (fairness.MAX_BODY_BYTES + 1))
    assert status == 413 and one_line(body)


def test_an_answer_stream_for_a_session_with_nothing_pending_is_one_line_and_a_known_one_passes():
    door = Door(blocks(pending={"known"}))
    status, body = serve_body(QueueDoor(Inner(), door), request("/gradio_api/queue/data", b"session_hash=nope"), b"")
    assert status == 404 and "nothing is waiting" in one_line(body)
    assert serve_body(QueueDoor(Inner(), door), request("/gradio_api/queue/data", b"session_hash=known"), b"")[0] == 200
    for path in ("/gradio_api/call/run/no-such-event", "/gradio_api/call/v2/run/no-such-event/"):
        status, body = serve_body(QueueDoor(Inner(), door), request(path), b"")
        assert status == 404 and "nothing is waiting" in one_line(body)
    assert serve_body(QueueDoor(Inner(), door), request("/gradio_api/call/run/known"), b"")[0] == 200


def test_one_address_holds_at_most_its_share_of_the_queue_and_identical_jobs_count_once():
    flood = [event(fns()[2], [f"prompt {i}"], session=f"f{i}") for i in range(fairness.JOBS_PER_ADDRESS)]
    door = Door(blocks(*flood))
    status, body = join(door, 2, ["another prompt"])
    assert status == 429 and "already has 8 runs waiting" in one_line(body)
    assert join(door, 2, ["prompt 3"])[0] == 200  # the same as one waiting: computed once, so it may join
    assert join(door, 2, ["another prompt"], client="198.51.100.7")[0] == 200  # every other address has its places
    class_of = [event(fns()[2], ["point 1"], session=f"c{i}") for i in range(fairness.PLACES_PER_ADDRESS)]
    door = Door(blocks(*class_of))
    status, body = join(door, 2, ["point 1"])
    assert status == 429 and f"({fairness.PLACES_PER_ADDRESS} at once" in one_line(body)
    assert fairness.PLACES_PER_ADDRESS <= 128 // 3  # the stated share of the app's queue (app/main.py QUEUE_SIZE)


RUN = ["def f(x):\n", ["baseline", "eagle3", "dflash", "dspark"], 0.0, 4, 7, 64, 0, "rejection", True, "throughput",
       0.5, "auto", 16, 1]


def test_a_comparison_over_the_budget_is_refused_in_one_line_with_the_largest_settings_that_fit():
    costs = runner.RunCosts(token_s=0.01, request_token_s=0.001, batch_s=0.01)
    door = Door(blocks(), budget_s=15.0, estimate=fairness.comparison_estimate(costs))
    assert join(door, 0, RUN)[0] == 200  # 4 lanes × 64 tokens: about 2.6 s
    big = list(RUN)
    big[5], big[13] = 512, 32
    status, body = join(door, 0, big)
    text = one_line(body)
    assert costs.live_s([(512, 32)] * 4) > 15
    assert status == 429 and f"about {math.ceil(costs.live_s([(512, 32)] * 4))} s (4 lanes × 512 new tokens × 32 " \
                             "requests at once)" in text
    fits = int((15 / 4 - costs.fixed_s(32)) / costs.per_token_s(32))
    assert f"up to {fits} new tokens at 32 requests at once, or {int(15 / (4 * 0.01))} at 1 request" in text
    fitting = list(big)
    fitting[5] = fits
    assert join(door, 0, fitting)[0] == 200 and costs.live_s([(fits, 32)] * 4) <= 15
    raised = Door(blocks(), budget_s=120.0, estimate=fairness.comparison_estimate(costs))
    assert join(raised, 0, big)[0] == 200  # the operator's --job-budget
    bad = list(big)
    bad[5] = "many"
    assert join(door, 0, bad)[0] == 200  # the handler refuses it itself, in its own line
    heavy = Door(blocks(), budget_s=15.0, estimate=fairness.comparison_estimate(runner.RunCosts(batch_s=1.0)))
    text = one_line(join(heavy, 0, big)[1])  # a batch of 32 alone is over the budget: only one request fits
    assert "What fits: 4 lanes of up to 375 new tokens at 1 request at once, or fewer lanes." in text
    busy = runner.RunCosts(token_s=0.1)  # a busy server's learned costs: the default run "takes" 26 s
    crowded = Door(blocks(), budget_s=15.0, estimate=fairness.comparison_estimate(busy))
    assert busy.live_s([(64, 1)] * 4) > 15 and join(crowded, 0, RUN)[0] == 200  # the page's defaults always run
    longer = list(RUN)
    longer[5] = 65
    assert join(crowded, 0, longer)[0] == 429  # one token past them is estimated as any other


def test_the_rest_apis_calls_meet_the_same_door():
    costs = runner.RunCosts()
    flood = [event(fns()[2], [f"prompt {i}"], session=f"f{i}") for i in range(fairness.JOBS_PER_ADDRESS)]
    door = Door(blocks(*flood), budget_s=15.0, estimate=fairness.comparison_estimate(costs))
    big = list(RUN)
    big[5] = 512
    other = "198.51.100.2"  # not the address flooding the queue
    for path, data, client, status, words in (
            ("/gradio_api/call/run", big, other, 429, "would hold the shared engine"),
            ("/gradio_api/call/v2/echo", ["new"], "203.0.113.5", 429, "already has 8 runs waiting"),
            ("/gradio_api/call/nothing", [], other, 404, "no API endpoint 'nothing'")):
        answer, body = serve_body(QueueDoor(Inner(b'{"event_id": "x"}'), door),
                                  request(path, method="POST", client=client), json.dumps({"data": data}).encode())
        assert answer == status and words in one_line(body), path
    assert serve_body(QueueDoor(Inner(b'{"event_id": "x"}'), door), request("/gradio_api/call/run", method="POST",
                                                                           client=other),
                      json.dumps({"data": RUN}).encode())[0] == 200


def test_the_costs_learn_from_measured_passes_and_the_repeats_fit_in_their_time():
    costs = runner.RunCosts(token_s=0.01, request_token_s=0.0, weight=0.5)
    costs.observe([(100, 1)], 2.0)  # twice the estimate
    assert costs.live_s([(100, 1)]) == pytest.approx(1.5)
    assert [runner.runs_that_fit(s, 3) for s in (1.0, 4.0, 5.0, 6.0, 6.5, 20.0)] == [3, 3, 2, 2, 1, 1]  # in 12 s
    assert costs.total_s([(100, 1)]) == pytest.approx(4.5)


def what_fits(door) -> int:
    """The new tokens the refusal of a 4-lane, 512-token, 1-request comparison names as fitting."""
    big = list(RUN)
    big[5] = 512
    status, body = join(door, 0, big)
    assert status == 429
    return int(re.search(r"What fits: 4 lanes of up to (\d+) new tokens at 1 request at once", one_line(body))[1])


def test_what_a_visitor_may_run_does_not_move_with_a_loaded_period():
    learned = runner.RunCosts(token_s=0.01, request_token_s=0.0, weight=0.5)
    door = Door(blocks(), budget_s=15.0, estimate=fairness.comparison_estimate(learned))
    learned.observe([(64, 1)] * 4, 4 * 64 * 0.012)  # the first run, on a quiet server: 20 % slower than the prior
    quiet = what_fits(door)
    assert quiet == int(15 / (4 * 0.012))
    for _ in range(20):  # a loaded period: every pass three times as slow
        learned.observe([(64, 1)] * 4, 3 * 4 * 64 * 0.012)
    assert learned.live_s([(64, 1)]) > 2.5 * 64 * 0.012  # the queue's waits follow the load ...
    assert abs(what_fits(door) - quiet) <= 0.2 * quiet  # ... what a visitor may run does not
    learned.observe([(64, 1)] * 4, 4 * 64 * 0.010)  # a quieter pass than any before lowers it
    assert what_fits(door) == int(15 / (4 * 0.010))


def test_the_budgets_refusal_counts_in_plain_words():
    costs = runner.RunCosts(token_s=0.01, request_token_s=0.001, batch_s=0.01)
    door = Door(blocks(), budget_s=15.0, estimate=fairness.comparison_estimate(costs))
    for requests, words in ((1, "× 1 request at once"), (2, "× 2 requests at once")):
        big = list(RUN)
        big[5], big[13] = 512, requests
        text = one_line(join(door, 0, big)[1])
        assert words in text and "1 requests" not in text, text


def behind_three_visitors():
    """A presenter, three visitors' runs waiting for the engine, the presenter's run, and the queue holding them."""
    presenter = Presenter("a-long-presenter-key")
    waiting = [event(fns()[2], [f"p{i}"], session=f"v{i}") for i in range(3)]
    mine = event(fns()[2], ["live"], session="lecturer")
    gradio = blocks(*waiting, mine)
    gradio._queue.event_ids_to_events["x"] = mine
    return presenter, waiting, mine, gradio


def test_a_presenters_join_goes_to_a_lane_of_its_own_and_the_budget_does_not_hold_it():
    presenter, waiting, mine, gradio = behind_three_visitors()
    costs = runner.RunCosts()
    door = Door(gradio, budget_s=1.0, presenter=presenter.holds, estimate=fairness.comparison_estimate(costs))
    big = list(RUN)
    big[5] = 512
    assert join(door, 0, big)[0] == 429  # a visitor's
    assert join(door, 0, big, cookie=f"{COOKIE}=forged")[0] == 429
    assert join(door, 2, ["live"], cookie=f"theme=dark; {COOKIE}={token('a-long-presenter-key')}")[0] == 200
    lanes = gradio._queue.event_queue_per_concurrency_id
    assert lanes[fairness.PRESENTER_LANE].queue == [mine] and mine.concurrency_id == fairness.PRESENTER_LANE
    assert lanes["engine"].queue == waiting and door.presenters == {"lecturer"} and door.presenter_running()


def test_the_presenter_page_sets_a_cookie_of_the_keys_digest_and_a_wrong_key_is_one_line(monkeypatch):
    monkeypatch.setattr("app.hosting.presenter.WRONG_KEY_PAUSE_S", 0)
    page = PresenterPage(Inner(), Presenter("a-long-presenter-key"))
    sent = []

    async def send(message):
        sent.append(message)

    def post(body: bytes):
        sent.clear()

        async def receive():
            return {"type": "http.request", "body": body}

        asyncio.run(page(request("/presenter", method="POST"), receive, send))
        return sent[0]["status"], dict(sent[0]["headers"]) if sent[0]["status"] == 303 else {}, sent[0]["headers"]

    status, _, _ = post(b"key=wrong")
    assert status == 403
    status, _, headers = post(b"key=a-long-presenter-key")
    cookies = [v.decode() for k, v in headers if k == b"set-cookie"]
    assert status == 303 and any(token("a-long-presenter-key") in c and "HttpOnly" in c for c in cookies)
    assert not any("a-long-presenter-key" in c for c in cookies)  # the digest, never the key
    assert serve_body(PresenterPage(Inner(), Presenter(None)), request("/presenter"), b"")[0] == 404
    with pytest.raises(ValueError):
        Presenter("short")


def test_stop_moves_the_sessions_waiting_jobs_to_a_lane_that_starts_them_at_once():
    mine = [event(fns()[2], [i], session="me") for i in range(2)]
    other = event(fns()[2], ["x"], session="someone")
    gradio = blocks(other, *mine)
    door = Door(gradio)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        door.loop = loop
        sessions = SessionStore()
        sessions.withdraw = door.withdraw
        state = sessions.get("me")
        state.press_run()
        started = time.monotonic()
        state.press_stop()
        assert time.monotonic() - started < 1.0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    lanes = gradio._queue.event_queue_per_concurrency_id
    assert lanes["engine"].queue == [other] and lanes[fairness.WITHDRAWN_LANE].queue == mine
    assert lanes[fairness.WITHDRAWN_LANE].concurrency_limit is None and state.withdrawn()


def test_a_crowd_of_new_sessions_never_drops_one_with_a_job_and_the_store_is_bounded_by_bytes_and_idle_time(
        random_engine):
    from compare_support import comparison_of

    clock = [0.0]
    comparison = comparison_of(random_engine, ["baseline", "eagle3"], max_new_tokens=8)
    from app.run.sessions import session_bytes

    store = SessionStore(limit=64, clock=lambda: clock[0])
    running = store.get("running")
    running.stop, running.last = threading.Event(), comparison
    queued = store.get("queued")
    queued.press_run()
    queued.last = comparison
    for i in range(70):
        clock[0] += 1
        store.get(f"fresh-{i}").last = comparison
    assert store.peek("running").last is comparison and store.peek("queued").last is comparison
    assert len(store) <= 64
    one = session_bytes(store.peek("running"))
    small = SessionStore(max_bytes=10 * one, clock=lambda: clock[0])
    busy = small.get("busy")
    busy.stop = threading.Event()
    for i in range(40):
        small.get(f"v{i}").last = comparison
        small.sweep()
    assert small.bytes() <= 10 * one and small.peek("busy") is busy
    idle = SessionStore(idle_s=60, clock=lambda: clock[0])
    idle.get("old")
    clock[0] += 61
    for i in range(70):
        idle.get(f"n{i}")
    assert idle.peek("old") is None and idle.peek("n69") is not None


def test_with_the_engine_in_the_servers_process_a_presenters_join_goes_to_the_head_of_the_line():
    presenter, waiting, mine, gradio = behind_three_visitors()
    door = Door(gradio, presenter=presenter.holds, own_lane=False)
    assert join(door, 2, ["live"], cookie=f"{COOKIE}={token('a-long-presenter-key')}")[0] == 200
    assert gradio._queue.event_queue_per_concurrency_id["engine"].queue == [mine, *waiting]
    assert not door.presenter_running()


def test_an_identical_run_that_ended_after_a_press_answers_it_and_the_engine_runs_once(random_engine):
    """A class pressing one Run together: each press waits its turn in the engine's queue, and the run that ended
    meanwhile answers every one of them; a press after that run ended, or from the API (no press), measures afresh."""
    from engine.contract.types import GenerationConfig

    streams = []

    class Counting:
        def __getattr__(self, name):
            return getattr(random_engine, name)

        def stream(self, request):
            streams.append(request.config.method)
            return random_engine.stream(request)

    engine = Counting()

    def lanes():
        return [runner.LaneRun(m, GenerationConfig(method=m, max_new_tokens=4)) for m in ("baseline", "eagle3")]

    def run(asked_s, prompt: str = "def shared(x):\n") -> list:
        ran = lanes()
        for _ in runner.run_lanes(engine, prompt, ran, threading.Event(), timing_runs=1, asked_s=asked_s):
            pass
        return ran

    pressed = time.monotonic()  # the whole class pressed before the first run ended
    first = run(pressed)
    assert streams == ["baseline", "eagle3"] and all(lane.state == "done" for lane in first)
    for _ in range(5):  # each press's turn: the run that ended since it pressed answers it
        again = run(pressed)
        assert [lane.steps for lane in again] == [lane.steps for lane in first]
        assert [lane.timing_runs for lane in again] == [1, 1]
    assert streams == ["baseline", "eagle3"]
    run(pressed, "def other(x):\n")
    assert len(streams) == 4  # other settings run
    run(time.monotonic())
    assert len(streams) == 6  # pressed after the identical run ended: measured afresh
    run(None)
    assert len(streams) == 8  # no press (an API call): measured afresh


def test_a_class_asking_for_one_drawing_at_once_waits_for_one_drawing_and_the_kept_ones_are_bounded():
    from app.run.sessions import DrawnOnce

    drawn, gate = DrawnOnce(limit=2), threading.Barrier(8)
    source, calls = object(), []

    def draw():
        calls.append(1)
        time.sleep(0.05)  # a drawing takes a while: the others ask meanwhile
        return ["drawing", len(calls)]

    def visitor(results: list):
        gate.wait()
        results.append(drawn.get("link", source, draw))

    results: list = []
    threads = [threading.Thread(target=visitor, args=(results,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(results) == 8 and all(r is results[0] for r in results)
    assert drawn.get("link", object(), draw) is not results[0] and len(calls) == 2  # another recording: drawn again
    for key in ("a", "b"):
        drawn.get(key, source, draw)
    assert drawn.get("link", source, draw) and len(calls) == 5  # only the last two keys are kept


def test_a_lane_timed_while_other_work_took_the_cores_says_so_on_its_chips():
    from dataclasses import replace

    from app import lesson
    from app.comparison import BUSY_SHARE
    from app.draw.render import chips_html

    recorded = lesson.recorded()["sampled"]

    def timed(baseline_shares: list[float]):
        """The recording, its baseline's timing runs computing `baseline_shares` of their wall time."""
        base = recorded.lanes["baseline"]
        rates = tuple((100.0, 100.0 * share) for share in baseline_shares)
        return replace(recorded, lanes={**recorded.lanes, "baseline": replace(base, run_rates=rates)})

    def chips(comparison, method: str = "dflash") -> str:
        return chips_html(comparison, method, [s for s in comparison.lanes[method].steps if s.kind == "decode"])

    alone = timed([0.97, 0.96, 0.98])
    assert alone.machine_busy("dflash") is None and "busy machine" not in chips(alone)
    crowded = timed([0.55, 0.5, 0.9])  # the median run: half the wall time
    assert crowded.machine_busy("dflash") == pytest.approx(0.55) and 0.55 < BUSY_SHARE
    assert "CPU <b>55%</b> <span class=\"tag\">busy machine</span>" in chips(crowded)
    assert "busy machine" in chips(crowded, "baseline")


def test_a_lane_run_while_the_server_was_busy_drawing_others_says_so_on_its_chips_and_in_its_file():
    from dataclasses import replace

    from app import lesson
    from app.comparison import SERVER_BUSY_SHARE, read_comparison
    from app.draw.render import chips_html

    recorded = lesson.recorded()["sampled"]

    def shared(base_share: float | None, lane_share: float | None = 0.99):
        """The recording, its baseline's and DFlash's live passes given these engine shares."""
        lanes = {**recorded.lanes, "baseline": replace(recorded.lanes["baseline"], engine_share=base_share),
                 "dflash": replace(recorded.lanes["dflash"], engine_share=lane_share)}
        return replace(recorded, lanes=lanes)

    def chips(comparison, method: str = "dflash") -> str:
        return chips_html(comparison, method, [s for s in comparison.lanes[method].steps if s.kind == "decode"])

    assert recorded.server_busy("dflash") is None and "busy server" not in chips(recorded)  # no shares: not said
    quiet = shared(0.98)
    assert quiet.server_busy("dflash") is None and "busy server" not in chips(quiet)
    crowded = shared(0.2)
    assert crowded.server_busy("dflash") == pytest.approx(0.2) and 0.2 < SERVER_BUSY_SHARE
    assert "engine <b>20%</b> <span class=\"tag\">busy server</span>" in chips(crowded)
    assert "busy server" in chips(crowded, "baseline") and "busy server" in chips(crowded, "eagle3")  # over it
    only_lane = shared(0.98, 0.2)  # DFlash alone ran behind a busy page: only its chips say so
    assert "busy server" in chips(only_lane) and "busy server" not in chips(only_lane, "eagle3")
    assert "busy server" not in chips(only_lane, "baseline")
    back = read_comparison(crowded.to_json())  # a saved comparison keeps what its live pass measured
    assert back.lanes["baseline"].engine_share == pytest.approx(0.2) and "busy server" in chips(back)
    # a run of a few steps: a low share, but well under a second of waiting (starting a run costs its share)
    base = recorded.lanes["baseline"]
    short = replace(shared(0.2), lanes={**shared(0.2).lanes, "baseline": replace(
        base, summary=replace(base.summary, wall_s=0.1))})
    assert short.server_busy("dflash") is None


def test_the_spaces_job_budget_is_read_from_its_variable_as_the_launch_option_is(capsys):
    from app.space import space_job_budget

    assert space_job_budget(None) == {} and space_job_budget(" ") == {}  # the app's default
    assert space_job_budget("60") == {"job_budget_s": 60.0}
    for bad in ("0", "3601", "nan", "ten"):
        assert space_job_budget(bad) == {}
    assert capsys.readouterr().err.count("SPECLAB_JOB_BUDGET") == 4


def test_a_run_waiting_past_the_stated_wait_is_told_its_place_its_start_and_the_recording_or_when_to_come_back():
    live_run = Fn(on_run)  # one function: a class pressing one point's Run it live asks the same thing
    ahead, same, other, mine = (event(live_run, [f"job {i}"], session=s)
                                for i, s in ((1, "a"), (1, "b"), (2, "c"), (3, "me")))
    line = EventQueue("engine", 1)
    line.queue.extend([ahead, same, other, mine])
    queue = SimpleNamespace(event_queue_per_concurrency_id={"engine": line}, active_jobs=[], process_time_per_fn={})
    job_s = fairness.job_seconds(SimpleNamespace(total_s=lambda lanes, runs=3: 30.0 * runs),
                                 live=lambda fn, data: ([(64, 1)], 2) if data == ["job 1"] else None)
    assert job_s(ahead) == 60.0 and job_s(other) is None  # a lesson point's live comparison; another job: unknown
    assert fairness.place_of(queue, "me", job_s) == (4, 60.0 + fairness.LIVE_PRIOR_S)  # the identical two once
    assert fairness.place_of(queue, "new", job_s)[0] == 5  # not in line yet: as if it joined now
    assert fairness.waiting_note(2, fairness.WAIT_WORDS_S - 1, None, "q") is None  # the queue's own figures suffice
    noon = 1_796_472_000.0  # 2026-12-05 12:00 UTC
    later = fairness.waiting_note(4, 150, None, "methods=baseline", now_s=noon)
    assert "number 4 in line" in later and "about 3 minutes (about 12:02 UTC" in later
    assert "come back after 12:02 UTC" in later and "<a " not in later
    offered = fairness.waiting_note(4, 150, "2026-12-05T11:40:00+00:00", "methods=baseline&prompt=a%26b", now_s=noon)
    assert '<a href="?methods=baseline&amp;prompt=a%26b" target="_blank"' in offered and "keep your place" in offered
    assert "come back" not in offered


def test_joins_arriving_at_once_each_count_against_their_addresses_share():
    door = Door(blocks())
    held = asyncio.Event()

    async def slow_gradio(scope, receive, send):  # Gradio answers a join only once it has queued it
        await held.wait()
        await Inner(b'{"event_id": "x"}')(scope, receive, send)

    async def crowd():
        answers = []

        async def one(i: int):
            sent = []

            async def send(message):
                sent.append(message)

            async def receive():
                body = json.dumps({"data": [f"prompt {i}"], "fn_index": 2, "session_hash": f"s{i}"}).encode()
                return {"type": "http.request", "body": body}

            await QueueDoor(slow_gradio, door)(request(fairness.JOIN, method="POST"), receive, send)
            answers.append(sent[0]["status"])

        tasks = [asyncio.create_task(one(i)) for i in range(12)]
        await asyncio.sleep(0.05)
        held.set()
        await asyncio.gather(*tasks)
        return answers

    answers = asyncio.run(crowd())
    assert answers.count(200) == fairness.JOBS_PER_ADDRESS and answers.count(429) == 12 - fairness.JOBS_PER_ADDRESS
    assert door.arriving == []  # each released once Gradio answered
