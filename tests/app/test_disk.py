"""What visitors can leave on the server's disk: uploads counted per address before they are read, and the folders
of uploads and downloads swept back under their total, oldest first, never a file just written."""

from __future__ import annotations

import json
import os
import time

from app.hosting import disk
from app.hosting.disk import DiskBudget, UploadBudget
from test_fairness import serve_body
from test_visitors import Inner, request

MB = 2**20


def test_an_address_past_its_upload_budget_is_refused_in_one_line_before_the_upload_is_read():
    clock = [0.0]
    budget = DiskBudget([], per_address=30 * MB, window_s=600, clock=lambda: clock[0])
    upload = UploadBudget(Inner(b'["/tmp/x"]'), budget)

    def send(length: int, client: str = "203.0.113.5"):
        scope = request("/gradio_api/upload", method="POST", client=client,
                        headers={"content-length": str(length)})
        return serve_body(upload, scope, b"")

    assert [send(10 * MB)[0] for _ in range(3)] == [200, 200, 200]
    status, body = send(10 * MB)
    text = json.loads(body)["error"]
    assert status == 429 and text.startswith("SpecLab: your address has uploaded 30 MB") and "\n" not in text
    assert send(10 * MB, client="198.51.100.7")[0] == 200  # another address has its own
    clock[0] += 601
    assert send(10 * MB)[0] == 200  # the window has passed


def test_an_upload_that_would_fill_the_folders_past_their_total_is_refused(tmp_path):
    budget = DiskBudget([tmp_path], max_bytes=25 * MB)
    inner = Inner(b'["/tmp/x"]')

    async def keeps_the_file(scope, receive, send):  # as Gradio does before it answers
        (tmp_path / f"upload-{inner.calls}").write_bytes(b"0" * 10 * MB)
        await inner(scope, receive, send)

    upload = UploadBudget(keeps_the_file, budget)
    scope = request("/gradio_api/upload", method="POST", headers={"content-length": str(10 * MB)})
    assert [serve_body(upload, {**scope, "client": (f"203.0.113.{i}", 1)}, b"")[0] for i in range(3)] == [200, 200, 429]
    status, body = serve_body(upload, {**scope, "client": ("203.0.113.9", 1)}, b"")
    assert status == 429 and json.loads(body)["error"].startswith("SpecLab: the server's room for uploaded files")


def test_the_folders_are_swept_back_under_their_total_oldest_first_never_a_new_file(tmp_path):
    uploads, downloads = tmp_path / "cache", tmp_path / "downloads"
    now = 10_000.0
    for folder, names in ((uploads, ("a", "b", "c")), (downloads, ("d", "e"))):
        (folder / "x").mkdir(parents=True)
        for age, name in zip((900, 600, 30), names):
            path = folder / "x" / name
            path.write_bytes(b"0" * MB)
            os.utime(path, (now - age - (name > "c") * 5, now - age - (name > "c") * 5))
    budget = DiskBudget([uploads, downloads], max_bytes=2 * MB, keep_younger_s=60, now=lambda: now)
    assert budget.total() == 5 * MB
    assert budget.sweep() == 3 * MB  # the oldest three: d (905 s), a (900 s), e (605 s)
    left = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["b", "c"] and budget.total() == 2 * MB
    (uploads / "x" / "young").write_bytes(b"0" * 3 * MB)
    os.utime(uploads / "x" / "young", (now, now))
    assert budget.sweep() == MB  # b, the one old enough; c and the new file stay, over the total
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["c", "young"]


KB = 1024


class Room:
    """A DiskBudget over a temporary cache and downloads folder on a clock the test moves, and an upload middleware
    whose inner app keeps each upload as Gradio does (a file in the cache, its path in the answer)."""

    def __init__(self, tmp_path, max_bytes: int = 500 * KB, per_address: int = 100 * KB, in_use=()):
        self.t = 1_000_000.0
        self.cache, self.downloads = tmp_path / "cache", tmp_path / "speclab-comparisons"
        self.cache.mkdir()
        self.downloads.mkdir()
        self.budget = DiskBudget([self.cache, self.downloads], max_bytes=max_bytes, per_address=per_address,
                                 window_s=600, clock=lambda: self.t, now=lambda: self.t, downloads=self.downloads,
                                 in_use=lambda: in_use)
        self.made = 0
        self.upload = UploadBudget(self.keep, self.budget)

    def write(self, path, size: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"0" * size)
        os.utime(path, (self.t, self.t))
        return path

    async def keep(self, scope, receive, send):
        self.made += 1
        path = self.write(self.cache / f"u{self.made}" / "saved.json", 10 * KB)
        await Inner(json.dumps([str(path)]).encode())(scope, receive, send)

    def send(self, client: str) -> int:
        scope = request("/gradio_api/upload", method="POST", client=client, headers={"content-length": str(10 * KB)})
        return serve_body(self.upload, scope, b"")[0]


def test_after_a_flood_from_16_addresses_a_new_visitor_uploads_within_a_minute_and_the_flood_ages_out(tmp_path):
    room = Room(tmp_path)
    answers = []
    for second in range(10):  # 16 addresses, each uploading as fast as its own budget lets it, for 10 s
        for i in range(16):
            answers.append(room.send(f"203.0.113.{i}"))
        room.t += 1
    assert answers.count(429) > 0 and room.budget.total() <= room.budget.max_bytes  # the room filled, never past it
    ended, waited = room.t, None
    while room.t - ended <= 120:
        if room.send("198.51.100.200") == 200:
            waited = room.t - ended
            break
        room.t += 5
    assert waited is not None and waited <= 60, waited  # KEEP_YOUNGER_S after the flood's first files, at most
    room.t = ended + disk.UPLOAD_LIFE_S + 1
    room.budget.sweep()  # the periodic sweep, whatever the total
    assert room.budget.total() == 10 * KB  # only the new visitor's upload, itself still within its life
    room.t += disk.UPLOAD_LIFE_S
    room.budget.sweep()
    assert room.budget.total() == 0


def test_an_offered_download_lives_its_stated_life_from_its_last_offer_whatever_floods_the_room(tmp_path):
    room = Room(tmp_path)
    name = "speclab-comparison-0123456789abcdef.json"
    offered = room.write(room.downloads / name, 50 * KB)
    copy = room.write(room.cache / "h" / name, 50 * KB)  # Gradio's copy, served to the page: made at the first offer
    room.t += 600
    os.utime(offered, (room.t, room.t))  # offered again (app/tabs/compare.py download_path touches it)
    life_ends = room.t + disk.DOWNLOAD_LIFE_S
    while room.t < life_ends - 60:
        for i in range(16):
            room.send(f"203.0.113.{i}")
        room.t += 300
        room.budget.sweep()
        assert copy.exists() and offered.exists(), room.t - life_ends
    assert copy.stat().st_mtime == offered.stat().st_mtime  # stamped with its last offer: Gradio's sweep reads that
    room.t = life_ends + 1
    room.budget.sweep(room_for=room.budget.max_bytes)
    assert not copy.exists() and not offered.exists()  # past its life it may make room


def test_a_file_a_page_uses_is_never_swept(tmp_path):
    using = set()
    room = Room(tmp_path, in_use=using)
    assert room.send("203.0.113.1") == 200
    path = str(room.cache / "u1" / "saved.json")
    using.add(path)  # named by an event waiting in the queue (app/hosting/disk.py queued_paths)
    room.t += disk.UPLOAD_LIFE_S * 10
    room.budget.sweep(room_for=room.budget.max_bytes)
    assert os.path.exists(path)
    using.clear()
    with disk.reading(path):  # being read by the page's handler
        room.budget.sweep(room_for=room.budget.max_bytes)
        assert os.path.exists(path)
    room.budget.sweep()
    assert not os.path.exists(path)


def test_the_files_named_by_queued_and_running_events_are_in_use():
    from types import SimpleNamespace

    def named(*paths):
        return SimpleNamespace(data=SimpleNamespace(data=[{"path": p, "meta": {"_type": "gradio.FileData"}}
                                                          for p in paths]))

    lane = SimpleNamespace(queue=[named("/cache/a/x.json"), SimpleNamespace(data=None)])
    queue = SimpleNamespace(event_queue_per_concurrency_id={"open-file": lane},
                            active_jobs=[[named("/cache/b/y")], None])
    assert disk.queued_paths(SimpleNamespace(_queue=queue)) == {"/cache/a/x.json", "/cache/b/y"}


def test_uploads_still_arriving_count_against_the_total(tmp_path):
    budget = DiskBudget([tmp_path], max_bytes=25 * MB)
    assert [budget.has_room(10 * MB) for _ in range(3)] == [True, True, False]  # none written yet: a crowd at once
    budget.done(10 * MB, kept=False)  # one refused after all
    assert budget.has_room(10 * MB)


def test_room_is_made_for_every_upload_still_arriving(tmp_path):
    now = 10_000.0
    for i in range(5):
        path = tmp_path / f"old-{i}"
        path.write_bytes(b"0" * MB)
        os.utime(path, (now - 600 + i, now - 600 + i))
    budget = DiskBudget([tmp_path], max_bytes=5 * MB, now=lambda: now)
    budget.sweep()
    assert budget.has_room(0) and not budget.has_room(MB)  # full of old files
    budget.arriving = 2 * MB  # two uploads admitted, still arriving
    budget.sweep(room_for=MB)
    assert budget.total() == 2 * MB and budget.has_room(MB)  # room for the three


def test_the_download_button_states_the_life_the_sweep_keeps_a_download():
    """The page's words come from the same DOWNLOAD_LIFE_S the sweep keeps an offered download by."""
    import re

    hours = re.fullmatch(r"Download this comparison \(link kept (\d+) h\)", disk.download_label())
    assert hours and float(hours.group(1)) * 3600 == disk.DOWNLOAD_LIFE_S
    assert disk.download_label(1800) == "Download this comparison (link kept 30 min)"
    assert [disk.life_words(s) for s in (7200, 5400, 90, 45)] == ["2 h", "90 min", "2 min", "45 s"]


def test_the_timed_sweeps_end_when_the_server_closes(tmp_path):
    budget = DiskBudget([tmp_path], max_bytes=MB)
    sweeps, serving = [], [True]
    budget.sweep = lambda room_for=0: sweeps.append(room_for)
    thread = budget.every(seconds=0.01, serving=lambda: serving[0])
    deadline = time.monotonic() + 10
    while len(sweeps) < 3 and time.monotonic() < deadline:  # it sweeps while the server is up ...
        thread.join(0.01)
    assert len(sweeps) >= 3
    serving[0] = False
    thread.join(5)
    assert not thread.is_alive()  # ... and ends once it closes
