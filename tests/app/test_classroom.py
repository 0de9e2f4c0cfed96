"""A class code: a whole class behind one school address gets a place each, told its place and expected wait;
without a code, and once the class ends or expires, the per-address rule is what it was."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("gradio")

from app.hosting import classroom as classes, fairness  # noqa: E402
from app.hosting.addresses import TokenBuckets, VisitorLimit  # noqa: E402
from app.hosting.classroom import ClassPage, Classroom  # noqa: E402
from app.hosting.fairness import Door, QueueDoor  # noqa: E402
from app.hosting.presenter import COOKIE as PRESENTER_COOKIE, Presenter, PresenterPage, token  # noqa: E402
from test_fairness import blocks, fns, one_line, serve_body  # noqa: E402
from test_visitors import Inner, request, serve  # noqa: E402

SCHOOL = "198.51.100.10"  # the one address a whole class reaches the server from
KEY = "a-long-presenter-key"
PRESENTER = f"{PRESENTER_COOKIE}={token(KEY)}"


class School:
    """A server's door, its queue and its class page, with a clock the test moves."""

    def __init__(self):
        self.t = 1_000_000.0
        self.classroom = Classroom(clock=lambda: self.t)
        self.gradio = blocks()
        self.gradio._queue.active_jobs, self.gradio._queue.process_time_per_fn = [], {}
        self.door = Door(self.gradio, classroom=self.classroom)
        self.page = ClassPage(Inner(b"the app"), self.classroom, Presenter(KEY))

    def post(self, path: str, form: str, cookie: str = "", client: str = SCHOOL) -> tuple[int, dict, bytes]:
        scope = request(path, method="POST", client=client, headers={"cookie": cookie} if cookie else {})
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": form.encode()}

        import asyncio

        asyncio.run(self.page(scope, receive, send))
        headers = {}
        for key, value in sent[0].get("headers", []):
            headers.setdefault(key.decode(), []).append(value.decode())
        return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])

    def open(self, code: str = "bio-7", size: int = 40) -> int:
        return self.post(classes.OPEN_PATH, f"code={code}&size={size}&hours=2", PRESENTER)[0]

    def enter(self, code: str = "bio-7") -> str | None:
        """A browser entering the code: its cookie header, or None when refused."""
        status, headers, _ = self.post(classes.PATH, f"code={code}")
        if status != 303:
            return None
        return "; ".join(c.split(";")[0] for c in headers["set-cookie"])

    def join(self, i: int, cookie: str = "") -> int:
        """Browser i asks for a run of its own (a distinct job); when admitted it waits in the queue."""
        data = [f"comparison {i}"]
        body = json.dumps({"data": data, "fn_index": 2, "session_hash": f"s{i}"}).encode()
        scope = request(fairness.JOIN, method="POST", client=SCHOOL, headers={"cookie": cookie} if cookie else {})
        status, _ = serve_body(QueueDoor(Inner(b'{"event_id": "x"}'), self.door), scope, body)
        if status == 200:
            self.gradio._queue.event_queue_per_concurrency_id["engine"].queue.append(SimpleNamespace(
                fn=fns()[2], data=SimpleNamespace(data=data), session_hash=f"s{i}", concurrency_id="engine",
                request=SimpleNamespace(client=SimpleNamespace(host=SCHOOL), headers={"cookie": cookie})))
        return status


def test_without_a_code_a_class_behind_one_address_meets_the_per_address_rule():
    school = School()
    answers = [school.join(i) for i in range(35)]
    assert answers.count(200) == fairness.JOBS_PER_ADDRESS and answers.count(429) == 35 - fairness.JOBS_PER_ADDRESS
    assert school.open() == 303  # a class open changes nothing for browsers that did not enter its code
    assert school.join(99) == 429


def test_with_a_class_of_40_each_of_35_browsers_gets_a_place_and_is_told_its_wait():
    school = School()
    assert school.open(size=40) == 303
    browsers = [school.enter() for _ in range(35)]
    assert all(browsers) and len(set(browsers)) == 35
    assert [school.join(i, cookie) for i, cookie in enumerate(browsers)] == [200] * 35
    told = [fairness.place_of(school.gradio._queue, f"s{i}", lambda event: 8.0) for i in range(35)]
    assert [place for place, _ in told] == list(range(1, 36))
    assert [wait for _, wait in told] == [8.0 * i for i in range(35)]  # each job ahead estimated at 8 s
    assert fairness.waiting_note(*told[-1], None, "") is not None  # past a minute, told in words too
    # a browser of the same address without the code keeps the address's own share, which the members do not take
    assert [school.join(100 + i) for i in range(fairness.JOBS_PER_ADDRESS + 1)].count(200) == fairness.JOBS_PER_ADDRESS
    for more in range(5):
        assert school.enter() is not None
    status, _, body = school.post(classes.PATH, "code=bio-7")
    assert status == 403 and b"full: 40 of 40" in body  # up to the class's size


def test_ending_the_class_or_its_expiry_returns_everyone_to_the_per_address_rule(monkeypatch):
    monkeypatch.setattr(classes, "WRONG_CODE_PAUSE_S", 0)
    for ends in ("ended", "expired"):
        school = School()
        school.open()
        browsers = [school.enter() for _ in range(12)]
        if ends == "ended":
            assert school.post(classes.END_PATH, "", PRESENTER)[0] == 303
        else:
            school.t += 2 * 3600 + 1
        answers = [school.join(i, cookie) for i, cookie in enumerate(browsers)]
        assert answers.count(200) == fairness.JOBS_PER_ADDRESS, ends
        assert school.enter() is None  # the old code opens nothing
        status, headers, body = serve(school.page, request(classes.PATH, headers={"cookie": browsers[0]}))
        assert b"No class is open" in body and f"{classes.MARK_COOKIE}=; Max-Age=0" in headers.get("set-cookie", "")


def test_only_the_presenter_opens_a_class_and_a_wrong_code_is_one_line(monkeypatch):
    monkeypatch.setattr(classes, "WRONG_CODE_PAUSE_S", 0)
    school = School()
    status, _, body = school.post(classes.OPEN_PATH, "code=bio-7&size=40&hours=2")
    assert status == 403 and "only the presenter" in body.decode() and not school.classroom.is_open()
    assert school.post(classes.OPEN_PATH, "code=x&size=40&hours=2", PRESENTER)[0] == 400  # too short a code
    assert school.post(classes.OPEN_PATH, "code=bio-7&size=9999&hours=2", PRESENTER)[0] == 400
    school.open()
    status, _, body = school.post(classes.PATH, "code=wrong-code")
    assert status == 403 and b"not the code of a class open here" in body
    page = PresenterPage(Inner(), Presenter(KEY), extra=lambda: classes.presenter_form(school.classroom))
    assert b"Class &#x27;bio-7&#x27; is open" in serve(page, request("/presenter", headers={"cookie": PRESENTER}))[2]
    assert b"Open a class" not in serve(page, request("/presenter"))[2]  # only the presenter's browser sees it


def test_a_class_holds_at_most_its_size_of_the_queue_together():
    school = School()
    school.open(size=3)
    browsers = [school.enter() for _ in range(3)]
    answers = [school.join(10 * b + j, cookie) for b, cookie in enumerate(browsers) for j in range(8)]
    assert answers.count(200) == 3 * fairness.JOBS_PER_ADDRESS  # each member its own 8 distinct jobs
    small = School()
    small.open(size=40)
    many = [small.enter() for _ in range(6)]
    answers = [small.join(10 * b + j, cookie) for b, cookie in enumerate(many) for j in range(8)]
    assert answers.count(200) == 40  # 6 members × 8 jobs asked: the class's 40 places
    data = json.dumps({"data": ["one more"], "fn_index": 2, "session_hash": "x"}).encode()
    status, body = serve_body(QueueDoor(Inner(b'{"event_id": "x"}'), small.door),
                              request(fairness.JOIN, method="POST", client=SCHOOL,
                                      headers={"cookie": small.enter()}), data)
    assert status == 429 and "your class already has 40 runs waiting" in one_line(body)


def test_each_member_has_a_request_limit_of_its_own():
    school = School()
    school.open()
    members = [school.enter() for _ in range(2)]
    limit = VisitorLimit(Inner(), TokenBuckets(burst=3, rate=0.001), key=classes.scope_identity(school.classroom))
    for cookie in members:
        assert [serve(limit, request("/", client=SCHOOL, headers={"cookie": cookie}))[0] for _ in range(3)] == [200] * 3
    assert serve(limit, request("/", client=SCHOOL, headers={"cookie": members[0]}))[0] == 429
    assert [serve(limit, request("/", client=SCHOOL))[0] for _ in range(4)] == [200, 200, 200, 429]  # the address's
