"""The presenter key: a lecturer's browser goes ahead of the class in the engine's queue.

The operator sets a secret in the environment (`SPECLAB_PRESENTER_KEY`, at least MIN_KEY_CHARS characters); it never
appears in a link. The lecturer opens `/presenter` on the app's address and types it in: the server answers with a
cookie (HttpOnly, SameSite=Strict, for MAX_AGE_S) holding a digest of the key, never the key, and sends the browser to
the slides. From then on that browser's runs skip the line (app/hosting/fairness.py: each starts at once, and a
visitor's comparison lets it have the engine before its own next lane), are not held to the per-run budget, and the
page shows a "presenter" mark in its corner. Without a key set, `/presenter` says so and nothing changes. A wrong
key is answered in one line after a pause of WRONG_KEY_PAUSE_S, besides the address's request limit.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import html

from .addresses import answer, html_page, read_form, see_other

ENVIRONMENT = "SPECLAB_PRESENTER_KEY"
MIN_KEY_CHARS = 12
PATH = "/presenter"
COOKIE = "speclab_presenter"
MARK_COOKIE = "speclab_presenter_mark"  # readable by the page's script: it only draws the mark
MAX_AGE_S = 12 * 3600  # a teaching day
WRONG_KEY_PAUSE_S = 1.0

FORM = """<!doctype html><html><head><meta charset="utf-8"><title>SpecLab presenter</title>
<style>body{{font:18px system-ui,sans-serif;margin:3em auto;max-width:36em}}input{{font-size:18px}}</style></head>
<body><h1>Presenter</h1><p>{said}</p><form method="post" action="{path}"><input type="password" name="key"
autocomplete="current-password" autofocus placeholder="the presenter key" size="30"> <input type="submit"
value="Enter"></form><p>Your runs then go ahead of the queue, for {hours} hours in this browser. The key is
never part of a link.</p>{extra}</body></html>"""


def token(key: str) -> str:
    """What the cookie holds: a digest of the key."""
    return hmac.new(key.encode("utf-8", "surrogatepass"), b"speclab presenter", hashlib.sha256).hexdigest()


def cookies(scope: dict) -> dict[str, str]:
    text = b";".join(v for k, v in scope.get("headers", []) if k == b"cookie").decode("latin-1")
    pairs = (part.strip().partition("=") for part in text.split(";"))
    return {name: value for name, _, value in pairs if name}


def checked_key(key: str | None) -> str | None:
    """The operator's key, or None when none is set; raises ValueError for one too short to be a secret."""
    if not key:
        return None
    if len(key) < MIN_KEY_CHARS:
        raise ValueError(f"{ENVIRONMENT} must be at least {MIN_KEY_CHARS} characters long")
    return key


class Presenter:
    """The key's check, shared by the door and the middleware below."""

    def __init__(self, key: str | None):
        self.key = checked_key(key)
        self.token = token(self.key) if self.key else None

    def holds(self, scope: dict) -> bool:
        """Whether this request comes from a browser that entered the key."""
        given = cookies(scope).get(COOKIE)
        return self.token is not None and given is not None and hmac.compare_digest(given, self.token)


class PresenterPage:
    """ASGI middleware serving `/presenter`: the form (GET) and the key's check (POST)."""

    def __init__(self, app, presenter: Presenter, extra=None):
        self.app, self.presenter = app, presenter
        self.extra = extra  # () -> HTML shown to the presenter's browser below the form (the class's, classroom.py)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") not in (PATH, PATH + "/"):
            return await self.app(scope, receive, send)
        if self.presenter.key is None:
            return await answer(send, 404, "SpecLab: this server has no presenter key set (the operator sets "
                                           f"{ENVIRONMENT}).")
        if scope.get("method") != "POST":
            holds = self.presenter.holds(scope)
            said = "This browser is the presenter's." if holds else "Enter the key the operator set."
            return await self.page(send, 200, said, self.extra() if holds and self.extra is not None else "")
        given = (await read_form(receive)).get("key", "")
        if not hmac.compare_digest(token(given), self.presenter.token):
            await asyncio.sleep(WRONG_KEY_PAUSE_S)
            return await self.page(send, 403, "That is not the presenter key.")
        cookie = f"{COOKIE}={self.presenter.token}; Max-Age={MAX_AGE_S}; Path=/; HttpOnly; SameSite=Strict"
        mark = f"{MARK_COOKIE}=1; Max-Age={MAX_AGE_S}; Path=/; SameSite=Strict"
        await see_other(send, "./?lesson=1&present=1", [cookie, mark])

    @staticmethod
    async def page(send, status: int, said: str, extra: str = "") -> None:
        await html_page(send, status, FORM.format(said=html.escape(said), path=PATH, hours=MAX_AGE_S // 3600,
                                                  extra=extra))


# The mark: drawn by the page itself from the readable cookie (the key's cookie is HttpOnly).
HEAD = f"""<style>#presenter-mark {{ position: fixed; top: 6px; right: 8px; z-index: 1000; padding: 2px 10px;
border-radius: 10px; background: #0072b2; color: #fff; font: 600 14px system-ui, sans-serif; }}</style>
<script>
(() => {{
  const add = () => {{
    if (!document.cookie.split("; ").includes("{MARK_COOKIE}=1") || document.getElementById("presenter-mark")) return;
    const mark = document.createElement("div");
    mark.id = "presenter-mark"; mark.textContent = "presenter";
    mark.title = "This browser entered the presenter key: its runs go ahead of the queue";
    document.body.appendChild(mark);
  }};
  // the page's head may run after the document has loaded (Gradio adds it once its configuration is read)
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", add); else add();
}})();
</script>"""
