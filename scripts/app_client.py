"""A minimal client of a running SpecLab app, speaking Gradio's protocol as a browser page does: join the
queue and read the event stream (or, for an event the app runs outside the queue, one POST), count every
byte received. Used by the measurement scripts
(app_timing.py, app_load.py); not part of the app."""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parents[1]
API = "gradio_api"


@functools.cache
def tls() -> ssl.SSLContext:
    """One TLS context for every httpx client of this process: making one reads the CA bundle (about 40 ms of CPU),
    and a crowd opens a client per request. (The app here is plain HTTP on the loopback; https works the same.)"""
    return httpx.create_ssl_context()


JSON = {"content-type": "application/json"}


def _body(data: list, fn_index: int, session: str) -> str:
    """An event's request body; NaN and infinity written as JavaScript writes them (a hostile client may)."""
    return json.dumps({"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None,
                       "trigger_id": None})


def start_app(port: int, log_path: Path | None = None, args: tuple[str, ...] = (), env: dict | None = None
              ) -> subprocess.Popen:
    """`python -m app` on this port (the embedded models), with `args` added and `env` set; returns once it
    serves its page."""
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    server = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), *args], cwd=ROOT, stdout=log,
                              stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit("the app exited before it served a page")
            time.sleep(0.5)
    server.kill()
    raise SystemExit("the app did not come up within 180 s")


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class App:
    def __init__(self, base: str):
        self.base = base.rstrip("/")
        self.config = httpx.get(f"{self.base}/config", timeout=30, verify=tls()).json()

    def fn_index(self, api_name: str | None = None, first_input_elem: str | None = None,
                 trigger: str | None = None) -> int:
        """The event's index, by its API name, the elem_id of its first input, or its trigger ("load")."""
        ids = {c["id"]: c.get("props", {}).get("elem_id") for c in self.config["components"]}
        for dep in self.config["dependencies"]:
            if trigger is not None and any(t[1] == trigger for t in dep.get("targets", [])):
                return dep["id"]
            if api_name is not None and dep.get("api_name") == api_name:
                return dep["id"]
            if first_input_elem is not None and dep["inputs"] and ids.get(dep["inputs"][0]) == first_input_elem:
                return dep["id"]
        raise LookupError(api_name or first_input_elem)

    def followers(self, fn_index: int) -> list[int]:
        """The event and each server-side `.then` after it, in order."""
        chain = [fn_index]
        while True:
            after = next((d["id"] for d in self.config["dependencies"]
                          if d.get("trigger_after") == chain[-1] and d.get("backend_fn")), None)
            if after is None:
                return chain
            chain.append(after)

    def elem_events(self, elem_id: str) -> list[int]:
        """The events a click on the component `elem_id` runs on the server, in order."""
        ids = {c["id"] for c in self.config["components"] if c.get("props", {}).get("elem_id") == elem_id}
        first = next(d["id"] for d in self.config["dependencies"]
                     if d.get("backend_fn") and any(t[0] in ids for t in d.get("targets", [])))
        return self.followers(first)

    def load_events(self) -> list[int]:
        """The events the page runs on the server as it opens, each load event followed by its `.then`s."""
        return [fn for d in self.config["dependencies"]
                if d.get("backend_fn") and any(t[1] == "load" for t in d.get("targets", []))
                for fn in self.followers(d["id"])]

    def output_elem(self, fn_index: int) -> list:
        """The elem_ids of an event's outputs."""
        ids = {c["id"]: c.get("props", {}).get("elem_id") for c in self.config["components"]}
        return [ids.get(i) for i in next(d for d in self.config["dependencies"] if d["id"] == fn_index)["outputs"]]

    def queued(self, fn_index: int) -> bool:
        """Whether the page sends this event through the queue (the app runs some, page loads among them,
        outside it)."""
        dep = next(d for d in self.config["dependencies"] if d["id"] == fn_index)
        return dep.get("queue") is not False

    def request(self, method: str, path: str, body: bytes | None = None, timeout_s: float = 60,
                headers: dict | None = None) -> tuple[int, str, bytes]:
        """One request on its own connection with the standard library's client (httpx refuses addresses over
        65,536 characters, and making an httpx client costs ~40 ms of CPU: in a crowd of a hundred on two cores
        that measured the load generator more than the server). Returns the status, the content type and the
        body (empty when the server closed the connection after its answer's head, as it does refusing a request
        it cannot read)."""
        parts = urlsplit(self.base)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
        try:
            connection.request(method, parts.path.rstrip("/") + path, body=body,
                               headers={**(JSON if body else {}), **(headers or {})})
            answer = connection.getresponse()
            try:
                content = answer.read()
            except OSError:
                content = b""
            return answer.status, answer.getheader("content-type", ""), content
        finally:
            connection.close()

    def call_direct(self, fn_index: int, data: list, session: str, timeout_s: float = 600, query: str = "") -> dict:
        """An event outside the queue, as the page sends it: one POST on its own connection, the outputs in its
        answer."""
        start = time.monotonic()
        status, kind, content = self.request("POST", f"/{API}/run/predict" + (f"?{query}" if query else ""),
                                             _body(data, fn_index, session).encode(), timeout_s)
        body = json.loads(content) if kind.startswith("application/json") else {}
        return {"ok": status == 200, "queue_full": False, "outputs": body.get("data"),
                "error": body.get("error") if status != 200 else None, "bytes": len(content),
                "messages": 1, "seconds": time.monotonic() - start}

    def call(self, fn_index: int, data: list, session: str | None = None, timeout_s: float = 600,
             query: str = "") -> dict:
        """Run one event to its end; `query`: the page's own query string (a share link's), which the page
        sends with its events. Returns {"ok", "outputs" (final values), "error", "bytes" (the event stream),
        "messages", "seconds", "queue_full"}."""
        session = session or uuid.uuid4().hex[:11]
        if not self.queued(fn_index):
            return self.call_direct(fn_index, data, session, timeout_s, query)
        start = time.monotonic()
        with httpx.Client(timeout=timeout_s, verify=tls()) as client:
            joined = client.post(f"{self.base}/{API}/queue/join" + (f"?{query}" if query else ""),
                                 content=_body(data, fn_index, session), headers=JSON)
            if joined.status_code in (429, 503):  # the app's words for a full queue (429), or Gradio's (503)
                return {"ok": False, "queue_full": True, "error": joined.json().get("detail", "queue full"),
                        "outputs": None, "bytes": 0, "messages": 0, "seconds": time.monotonic() - start}
            joined.raise_for_status()
            event_id = joined.json()["event_id"]
            received, messages = 0, 0
            with client.stream("GET", f"{self.base}/{API}/queue/data", params={"session_hash": session}) as stream:
                for line in stream.iter_lines():
                    received += len(line.encode()) + 1
                    if not line.startswith("data:"):
                        continue
                    msg = json.loads(line[5:])
                    if msg.get("event_id") not in (None, event_id):
                        continue
                    messages += 1
                    if msg.get("msg") == "process_completed":
                        output = msg.get("output") or {}
                        return {"ok": bool(msg.get("success")), "queue_full": False, "outputs": output.get("data"),
                                "error": output.get("error"), "bytes": received, "messages": messages,
                                "seconds": time.monotonic() - start}
        return {"ok": False, "queue_full": False, "outputs": None, "error": "stream ended", "bytes": received,
                "messages": messages, "seconds": time.monotonic() - start}


def join(app: App, fn_index: int, data: list, session: str, address: str | None = None,
         cookie: str | None = None) -> tuple[int, dict]:
    """Ask for a place in the queue as the page does, from `address` (sent as X-Forwarded-For, which the server
    honours from the loopback: one machine plays many visitors); (HTTP status, its JSON)."""
    headers = {**({"x-forwarded-for": address} if address else {}), **({"cookie": cookie} if cookie else {})}
    status, _, content = app.request("POST", f"/{API}/queue/join", _body(data, fn_index, session).encode(),
                                     headers=headers)
    try:
        return status, json.loads(content)
    except ValueError:
        return status, {"detail": content.decode("utf-8", "replace")}


def messages(app: App, session: str, event_id: str, until: tuple[str, ...] = ("process_completed",),
             timeout_s: float = 600, client: httpx.Client | None = None) -> list[tuple[float, dict]]:
    """(seconds since called, message) of one event's messages on its session's stream, until one named in `until`;
    over `client` (its cookies) where given, else a client of its own."""
    start, seen = time.monotonic(), []
    with contextlib.ExitStack() as opened:
        if client is None:
            client = opened.enter_context(httpx.Client(timeout=timeout_s, verify=tls()))
        stream = opened.enter_context(client.stream("GET", f"{app.base}/{API}/queue/data",
                                                    params={"session_hash": session}, timeout=timeout_s))
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:])
            if message.get("event_id") != event_id:
                continue
            seen.append((time.monotonic() - start, message))
            if message.get("msg") in until:
                break
    return seen
