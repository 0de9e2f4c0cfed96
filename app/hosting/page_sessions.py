"""Gradio's per-visitor state, without the page configuration it copies for every visitor.

For each new browser session Gradio builds a `SessionState`, and that builds the configuration of every
block on the page (about 160 here: 12 ms and 0.3 MiB per visitor), then rebuilds a block's configuration
each time an event updates it. That copy serves one feature only, Gradio's deep links (a button this app
does not have), yet it was most of the server's work when a class opened one recorded link at once.

`install` makes the running server's sessions lean: the configuration copy stays empty, so a visitor costs
what the app itself does. Everything else Gradio keeps per session (state values, updated components) is
kept as before. It relies on two names inside Gradio (`StateHolder.session_data`, and the
`config_for_block` that `SessionState` calls on its `blocks_config`); tests/test_app.py checks both on the
installed Gradio, so an upgrade that moves them fails a test rather than slowing the server.
"""

from __future__ import annotations

from types import SimpleNamespace

from gradio.state_holder import SessionState, StateHolder


def _no_config(*args, **kwargs) -> dict:
    """A block's configuration as a lean session keeps it: not at all (an empty entry)."""
    return {}


class LeanSessionState(SessionState):
    """A SessionState whose copy of the page's configuration is never filled."""

    def __init__(self, blocks):
        # Gradio fills the copy for the blocks in `blocks.blocks`: none, here.
        super().__init__(SimpleNamespace(default_config=blocks.default_config, blocks={}))
        self.blocks_config.config_for_block = _no_config  # nor do the updates its events make


class LeanStateHolder(StateHolder):
    """Gradio's StateHolder, making lean sessions."""

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = LeanSessionState(self.blocks)
        return super().__getitem__(session_id)


def install(demo) -> None:
    """Make the launched app's new sessions lean. A page with `gr.render` needs the configuration (Gradio
    renders from it), so such a page is left as it is."""
    if demo.default_config.renderables:
        return
    demo.server_app.state_holder.__class__ = LeanStateHolder
