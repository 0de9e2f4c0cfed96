"""Over-long addresses get the app's own answer.

Gradio builds every page's root URL with httpx, which refuses an address longer than 65,536 characters: such
such a request would end in a bare HTTP 500 and a traceback in the log. This ASGI middleware answers it first,
with HTTP 414 and one line a visitor can act on. The app's "Copy link" never makes a link this long
(app/tabs/compare.py MAX_LINK_CHARS), so only a hand-made or truncated-and-pasted address ever meets it.
"""

from __future__ import annotations

MAX_ADDRESS_CHARS = 65_536  # httpx's own limit on a URL (its parser refuses anything longer)
MESSAGE = (b"SpecLab: this address is too long for the server to open (it has room for about 64,000 characters). "
           b"A share link this long cannot carry its comparison: open the page without it, and share the file "
           b"from \"Download this comparison\" instead.\n")


def address_length(scope: dict) -> int:
    """The characters the request's address takes: path, query and their separator."""
    return len(scope.get("raw_path") or scope.get("path", "").encode()) + 1 + len(scope.get("query_string", b""))


class LongAddressGuard:
    """Answers HTTP 414 with MESSAGE to a request whose address is longer than `limit`; passes the rest on."""

    def __init__(self, app, limit: int = MAX_ADDRESS_CHARS - 1024):  # room for the scheme, host and port
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or address_length(scope) <= self.limit:
            return await self.app(scope, receive, send)
        await send({"type": "http.response.start", "status": 414,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(MESSAGE)).encode())]})
        await send({"type": "http.response.body", "body": MESSAGE})
