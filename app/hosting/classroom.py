"""A class code: a whole class behind one school address, each browser counted as its own member.

Classrooms, labs and campus networks reach a public server from one address, so the fairness that keeps one address
from taking the queue (app/hosting/fairness.py: places and distinct jobs per address; app/hosting/addresses.py: the
request limit) would turn most of a class away. The presenter (the browser holding the presenter key,
app/hosting/presenter.py) opens a class on `/presenter` with a code, a size and how many hours it lasts. Each
browser that enters that code on `/class` gets a cookie naming it a member, up to the size, and is counted for
fairness as a visitor of its own, whatever address it comes from: its own places and distinct jobs, its own
request limit. The class's members hold at most max(size, PLACES_PER_ADDRESS) places of the queue together, so a
class never takes more of it than its size. Without a code nothing changes for anyone; a wrong code is answered in
one line after WRONG_CODE_PAUSE_S. Ending the class, or its end time passing, returns every member to the
per-address rule (their cookies name a class that is no longer open).
"""

from __future__ import annotations

import asyncio
import hmac
import html
import re
import secrets
import threading
import time
from datetime import datetime, timezone

from .addresses import answer, client_address, html_page, read_form, see_other
from .presenter import Presenter

PATH = "/class"
OPEN_PATH, END_PATH = "/class/open", "/class/end"  # the presenter's forms (on /presenter)
COOKIE = "speclab_class"  # HttpOnly: "<class id>.<member token>"
MARK_COOKIE = "speclab_class_mark"  # readable by the page's script: "<member>-<size>", it only draws the mark
MAX_SIZE = 200
MAX_HOURS = 12
DEFAULT_SIZE, DEFAULT_HOURS = 40, 3
CODE = re.compile(r"[A-Za-z0-9-]{4,32}")
WRONG_CODE_PAUSE_S = 1.0
MEMBER = "class {id} member {n}"  # a member's identity for fairness

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>SpecLab class</title>
<style>body{{font:18px system-ui,sans-serif;margin:3em auto;max-width:36em}}input{{font-size:18px}}
.said{{padding:.5em .8em;border-radius:6px;background:#eef4fb}}</style></head>
<body><h1>Join a class</h1><p class="said" id="class-said">{said}</p>{form}</body></html>"""
ENTER_FORM = """<form method="post" action="{path}"><input name="code" autocomplete="off" autofocus size="20"
placeholder="the class code" aria-label="class code"> <input type="submit" value="Join"></form><p>The presenter
gives the code. Each browser that joins waits in the line of runs as a visitor of its own, told its place and
expected wait on the Compare tab, even when the whole class shares one school network.</p>"""

OPEN_APP = '<p><a href="./" id="open-app">Open SpecLab</a></p>'


class Classroom:
    """The one class open on this server (or none): its code, size and end, and the members that entered it."""

    def __init__(self, clock=time.time):
        self.clock = clock
        self.lock = threading.Lock()
        self.id: str | None = None
        self.code, self.size, self.ends_s = "", 0, 0.0
        self.members: dict[str, int] = {}  # member token -> member number (1, 2, ...)

    def open(self, code: str, size: int, hours: float) -> None:
        """Open a class (any class open before ends: its members are no longer counted apart)."""
        if not CODE.fullmatch(code):
            raise ValueError("a class code is 4 to 32 letters, digits or hyphens")
        if not 1 <= size <= MAX_SIZE:
            raise ValueError(f"a class has 1 to {MAX_SIZE} members")
        if not 0 < hours <= MAX_HOURS:
            raise ValueError(f"a class lasts at most {MAX_HOURS} hours")
        with self.lock:
            self.id, self.code, self.size = secrets.token_hex(8), code, size
            self.ends_s, self.members = self.clock() + hours * 3600, {}

    def end(self) -> None:
        with self.lock:
            self.id, self.members = None, {}

    def is_open(self) -> bool:
        with self.lock:
            return self._open()

    def _open(self) -> bool:
        if self.id is not None and self.clock() >= self.ends_s:
            self.id, self.members = None, {}  # expired: everyone back to the per-address rule
        return self.id is not None

    def enter(self, code: str) -> tuple[str, int] | str:
        """A browser entering `code`: (its cookie's value, its member number), or the one line refusing it."""
        with self.lock:
            if not self._open() or not hmac.compare_digest(code.encode("utf-8", "surrogatepass"),
                                                           self.code.encode("utf-8", "surrogatepass")):
                return "That is not the code of a class open here."
            if len(self.members) >= self.size:
                return (f"This class is full: {self.size} of {self.size} browsers have joined. Ask the presenter "
                        "to open it for more.")
            token = secrets.token_hex(12)
            self.members[token] = number = len(self.members) + 1
            return f"{self.id}.{token}", number

    def member(self, cookie_header: str) -> int | None:
        """The member number a request's cookies name in the open class, or None."""
        value = _cookie(cookie_header, COOKIE)
        class_id, _, token = (value or "").partition(".")
        with self.lock:
            if not token or not self._open() or not hmac.compare_digest(class_id, self.id or ""):
                return None
            return self.members.get(token)

    def identity(self, address: str, cookie_header: str) -> str:
        """Who a request is for fairness: its class member, else its address."""
        number = self.member(cookie_header) if self.id is not None else None
        return address if number is None else MEMBER.format(id=self.id, n=number)

    def is_member(self, identity: str) -> bool:
        """Whether a fairness identity is a member of the class open now."""
        return self.id is not None and identity.startswith(f"class {self.id} member ")

    def status(self) -> str:
        """The presenter's line about the class."""
        with self.lock:
            if not self._open():
                return "No class is open: every visitor is counted by address."
            at = datetime.fromtimestamp(self.ends_s, timezone.utc).strftime("%H:%M UTC")
            return (f"Class {self.code!r} is open until {at}: {len(self.members)} of {self.size} browsers have "
                    "joined.")


def _cookie(header: str, name: str) -> str | None:
    for part in (header or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def scope_cookie(scope: dict) -> str:
    return b";".join(v for k, v in scope.get("headers", []) if k == b"cookie").decode("latin-1")


def event_cookie(event) -> str:
    headers = getattr(getattr(event, "request", None), "headers", None)
    try:
        return str(headers.get("cookie", "")) if headers is not None else ""
    except Exception:  # noqa: BLE001 - an event without readable headers is counted by its address
        return ""


def scope_identity(classroom: Classroom | None):
    """For app/hosting/addresses.py VisitorLimit: a request's key for the request limit."""
    if classroom is None:
        return client_address
    return lambda scope: classroom.identity(client_address(scope), scope_cookie(scope))


def presenter_form(classroom: Classroom) -> str:
    """The class's part of the presenter's page: its state, and the forms that open or end it."""
    ending = (f'<form method="post" action="{END_PATH}"><input type="submit" value="End the class"></form>'
              if classroom.is_open() else "")
    return (f'<h2>Class</h2><p id="class-status">{html.escape(classroom.status())}</p>{ending}'
            f'<form method="post" action="{OPEN_PATH}">Code <input name="code" size="12" required '
            f'pattern="[A-Za-z0-9-]{{4,32}}"> size <input name="size" type="number" min="1" max="{MAX_SIZE}" '
            f'value="{DEFAULT_SIZE}" style="width:5em"> for <input name="hours" type="number" min="1" '
            f'max="{MAX_HOURS}" value="{DEFAULT_HOURS}" style="width:4em"> hours <input type="submit" '
            'value="Open a class"></form><p>Students open <code>/class</code> on this address and type the code; '
            "each of their browsers then waits in line as a visitor of its own, up to the size.</p>")


class ClassPage:
    """ASGI middleware serving `/class` (a student's form and answer) and the presenter's `/class/open` and
    `/class/end`."""

    def __init__(self, app, classroom: Classroom, presenter: Presenter):
        self.app, self.classroom, self.presenter = app, classroom, presenter

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "").rstrip("/") if scope["type"] == "http" else ""
        if path in (OPEN_PATH, END_PATH):
            return await self.presenters(scope, receive, send, path)
        if path != PATH:
            return await self.app(scope, receive, send)
        member = self.classroom.member(scope_cookie(scope))
        if scope.get("method") != "POST":
            said = (self.joined(member) if member is not None else
                    "Type the code the presenter gave." if self.classroom.is_open() else
                    "No class is open on this server just now: every visitor waits in line by address.")
            stale = member is None and _cookie(scope_cookie(scope), MARK_COOKIE) is not None
            return await page(send, 200, said, ENTER_FORM.format(path=PATH) if member is None else OPEN_APP,
                              [f"{MARK_COOKIE}=; Max-Age=0; Path=/"] if stale else [])  # a class ended: no mark
        entered = self.classroom.enter((await read_form(receive)).get("code", "").strip())
        if isinstance(entered, str):
            await asyncio.sleep(WRONG_CODE_PAUSE_S if entered.startswith("That is not") else 0)
            return await page(send, 403, entered, ENTER_FORM.format(path=PATH))
        value, number = entered
        age = max(1, int(self.classroom.ends_s - self.classroom.clock()))
        cookie = f"{COOKIE}={value}; Max-Age={age}; Path=/; HttpOnly; SameSite=Lax"
        mark = f"{MARK_COOKIE}={number}-{self.classroom.size}; Max-Age={age}; Path=/; SameSite=Lax"
        await see_other(send, "./", [cookie, mark])

    def joined(self, number: int) -> str:
        return (f"This browser is member {number} of {self.classroom.size} of class {self.classroom.code!r}: its "
                "runs wait in line as a visitor of their own, and the Compare tab shows each one's place and "
                "expected wait.")

    async def presenters(self, scope, receive, send, path: str):
        if scope.get("method") != "POST" or not self.presenter.holds(scope):
            return await answer(send, 403, "SpecLab: only the presenter's browser opens or ends a class "
                                           "(enter the key on /presenter).")
        form = await read_form(receive)
        if path == END_PATH:
            self.classroom.end()
        else:
            try:
                self.classroom.open(form.get("code", "").strip(), int(form.get("size", "")),
                                    float(form.get("hours", DEFAULT_HOURS)))
            except ValueError as exc:
                text = str(exc) if "class" in str(exc) else "the size and hours are whole numbers"
                return await answer(send, 400, f"SpecLab: {text}.")
        await see_other(send, "../presenter")


async def page(send, status: int, said: str, form: str, cookies: list[str] = ()) -> None:
    await html_page(send, status, PAGE.format(said=html.escape(said), form=form), cookies)


# The mark: drawn by the page itself from the readable cookie, as the presenter's is.
HEAD = f"""<style>#class-mark {{ position: fixed; top: 6px; right: 110px; z-index: 1000; padding: 2px 10px;
border-radius: 10px; background: #009e73; color: #fff; font: 600 14px system-ui, sans-serif; }}</style>
<script>
(() => {{
  const add = () => {{
    const found = document.cookie.split("; ").find((c) => c.startsWith("{MARK_COOKIE}="));
    const m = found && /^(\\d+)-(\\d+)$/.exec(found.slice({len(MARK_COOKIE) + 1}));
    if (!m || document.getElementById("class-mark")) return;
    const mark = document.createElement("div");
    mark.id = "class-mark"; mark.textContent = `class member ${{m[1]}} of ${{m[2]}}`;
    mark.title = "This browser joined a class: its runs wait in line as a visitor of their own";
    document.body.appendChild(mark);
  }};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", add); else add();
}})();
</script>"""
