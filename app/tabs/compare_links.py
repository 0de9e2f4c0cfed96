"""Share links on the Compare tab: opening the page with one (its controls set, its recorded run replayed or run
afresh), and making one from the controls."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl

import gradio as gr

from engine.contract.interface import EngineLike

from ..draw.charts import NUM_CHARTS
from ..draw.projector import adopt_from_link
from ..links import build_query, is_link, parse_query
from ..settings import PARSERS, SettingError, parse_controls
from .compare_views import LaneViews, Replays, control_values, notes_update, query_items

LONG_LINK_CHARS = 8_000  # past this, some servers and proxies refuse the address
MAX_LINK_CHARS = 60_000  # past this no link is made: the server itself cannot open an address over 65,536 bytes


class LinkHandlers:
    """Share links: opening the page with one (its controls set, its recorded run replayed or run afresh), and
    making one from the controls. `run`: the tab's RunController (app/tabs/compare.py), whose run_comparison a
    link's run goes through."""

    def __init__(self, engine: EngineLike, views: LaneViews, replays: Replays, run,
                 pin_key: str | None = None):
        self.engine, self.views, self.replays, self.run = engine, views, replays, run
        self.pin_key = pin_key or None  # a link opened with `pin=` this key pins its recorded run (app/recordings.py)

    def pins(self, request: gr.Request | None) -> bool:
        """Whether the page was opened with the operator's pin key (`pin=KEY` in its address)."""
        given = [v for k, v in query_items(request) if k == "pin"]
        return self.pin_key is not None and len(given) == 1 and hmac.compare_digest(
            given[0].encode("utf-8", "surrogatepass"), self.pin_key.encode("utf-8", "surrogatepass"))

    def run_link(self, query, show_drafts, request: gr.Request):
        if not isinstance(query, str) or not query:
            yield (gr.skip(),) * (1 + len(self.views.methods) + NUM_CHARTS)
            return
        settings, _ = parse_query(parse_qsl(query, keep_blank_values=True), self.views.defaults,
                                  available=self.views.methods)
        yield from self.run.run_comparison(settings, show_drafts if isinstance(show_drafts, bool) else True,
                                           request.session_hash, reuse=True, pin=self.pins(request))

    def restore(self, request: gr.Request):
        """Opening the page: a share link's parameters set every control, then the comparison runs. A link
        whose comparison this server has recorded is shown at once, from here: it never waits in the
        engine's queue behind other visitors' runs (a classroom on one link), nor fills it."""
        items = query_items(request)
        adopt_from_link(self.replays.sessions, request)
        settings, messages = parse_query(items, self.views.defaults, available=self.views.methods,
                                         preset=self.engine.preset)
        outputs = 1 + len(self.views.methods) + NUM_CHARTS
        if not messages and not is_link(items):
            return (gr.skip(),) * (len(PARSERS) + 2 + outputs)
        values = control_values(settings)
        notes = notes_update(messages, "This link had problems; the rest of it was used:")
        replay = (self.replays.recorded_outputs(self.replays.result_key(settings), request.session_hash, True)
                  if is_link(items) else None)
        if replay is not None:
            if self.pins(request):
                self.replays.pin(self.replays.result_key(settings))
            return *values, notes, gr.skip(), *replay
        return *values, notes, build_query(settings) if is_link(items) else gr.skip(), *[gr.skip()] * outputs

    def make_link(self, address, *values):
        """The link to the current controls, on the page's own address (the browser fills `address`)."""
        try:
            settings = parse_controls(dict(zip(PARSERS, values)), self.views.methods)
        except SettingError as exc:
            return gr.update(value="", visible=False), notes_update([str(exc)], "No link made:")
        base = address if isinstance(address, str) and address.startswith(("http://", "https://")) else ""
        link = f"{base}?{build_query(settings, self.engine.preset)}"
        if len(link) > MAX_LINK_CHARS:
            return gr.update(value="", visible=False), notes_update(
                [f"this comparison's link would be {len(link):,} characters, more than this server can open "
                 f"({MAX_LINK_CHARS:,}); a shorter prompt fits, or share the file from “Download this comparison”"],
                "No link made:")
        long = (notes_update([f"it is {len(link):,} characters long; some browsers and servers cut links past "
                              f"about {LONG_LINK_CHARS:,}, so a shorter prompt travels more safely"],
                             "Note on this link:") if len(link) > LONG_LINK_CHARS else notes_update([], ""))
        return gr.update(value=link, visible=True), long
