"""What visitors can leave on the server's disk: uploads counted per address before they are read, and the folders
of uploads and downloads swept back under their total, oldest first, never a file just written."""

from __future__ import annotations

import json
import os

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
