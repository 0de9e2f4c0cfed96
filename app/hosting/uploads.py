"""The "Open a saved comparison" button: whatever a browser or an API client sends reaches the handler.

Gradio's own UploadButton validates its payload as a file before the handler runs, so a client sending a
string, a number or a dict that is not a file got Gradio's generic "Error" and a traceback in the log. This
button hands the handler the file (as bytes or its path, as `type` asks) when one arrived, and None for
anything else, so the handler answers in one line. A file object naming a path Gradio did not receive is
still refused by Gradio itself, before any handler runs; this button reads only files in Gradio's cache.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
from gradio.data_classes import FileData
from gradio.utils import is_in_or_equal

from .disk import reading


class SavedFileButton(gr.UploadButton):
    """A single-file gr.UploadButton whose handler receives None for a payload that is not an uploaded file."""

    is_template = True  # drawn by the page as the UploadButton it is (Gradio's own convention for subclasses)

    @property
    def data_model(self):
        """None: Gradio validates nothing before `preprocess`, which turns a bad payload into None."""
        return None

    @data_model.setter
    def data_model(self, _value) -> None:  # gr.UploadButton's __init__ sets FileData; it is checked below instead
        pass

    def preprocess(self, payload: Any) -> bytes | str | None:
        if not isinstance(payload, dict):
            return None
        try:
            file = FileData.model_validate(payload)
        except ValueError:  # pydantic's ValidationError is a ValueError
            return None
        if not isinstance(file.path, str) or not is_in_or_equal(file.path, self.GRADIO_CACHE):
            return None  # only what Gradio itself received and moved into its cache
        try:
            with reading(file.path):  # no sweep of the disk's budget removes it while it is read
                return super().preprocess(file)
        except OSError:
            return None
