"""Whether a comparison's texts are what its token ids decode to.

A saved file carries each token twice: its id, from which "identical to the baseline" is computed, and its text,
which the page shows. A file whose texts were edited and whose ids were not would show one text under a badge
computed from another. `first_edited` decodes the ids again with the model's own tokenizer, as the engine writes a
committed token's text (engine/text.py: the token's bytes through an incremental UTF-8 decoder, special tokens
writing nothing) and a drafted token's (its bytes on their own), and names the first token whose text differs.

The tokenizer is read with the `tokenizers` package (no torch) from the preset's folder in assets/, so files of the
embedded models are checked; a file of another preset, whose tokenizer is not shipped, is not (None).
"""

from __future__ import annotations

import codecs
import functools
import threading
import weakref
from collections import OrderedDict

from engine.contract.presets import ASSETS_DIR, PRESETS

KEPT = 64  # comparisons whose answer is kept (a page draws each lane's badge, and draws them again)


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """The byte-level BPE alphabet back to bytes: printable bytes stand for themselves, the others for 256 + n."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[chr(byte)] = byte
        else:
            table[chr(256 + extra)] = byte
            extra += 1
    return table


class TokenBytes:
    """Each token's bytes for one byte-level tokenizer.json; special tokens have none."""

    def __init__(self, path):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path))
        self.special = {i: added.content for i, added in tokenizer.get_added_tokens_decoder().items() if added.special}
        special = self.special
        table = _byte_decoder()
        self.size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.pieces: list[bytes] = []
        for i in range(self.size):
            piece = tokenizer.id_to_token(i)
            if i in special or piece is None:
                self.pieces.append(b"")
            elif all(ch in table for ch in piece):
                self.pieces.append(bytes(table[ch] for ch in piece))
            else:
                self.pieces.append(piece.encode("utf-8"))

    def of(self, token_id: int) -> bytes:
        """What the token adds to the output: its bytes (none for a special token or an id past the vocabulary)."""
        return self.pieces[token_id] if 0 <= token_id < self.size else b""

    def alone(self, token_id: int) -> str:
        """How a drafted token reads on its own: special tokens by name, ids past the vocabulary as [id N]."""
        if token_id in self.special:
            return self.special[token_id]
        return self.of(token_id).decode("utf-8", errors="replace") if token_id < self.size else f"[id {token_id}]"


@functools.cache
def token_bytes(preset: str) -> TokenBytes | None:
    """The preset's tokenizer, when it ships in assets/ as a byte-level tokenizer.json; else None."""
    spec = PRESETS.get(preset)
    path = ASSETS_DIR / spec.tokenizer / "tokenizer.json" if spec is not None and spec.local else None
    if path is None or not path.is_file():
        return None
    try:
        return TokenBytes(path)
    except Exception:  # noqa: BLE001 - a tokenizer we cannot read checks nothing
        return None


def lane_edited(lane, tokens: TokenBytes) -> str | None:
    """Where a lane's texts first differ from its ids' ("output token N", "step S's drafted token N"); None when
    every text is what its id decodes to."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    written = 0
    for step in lane.steps:
        for position, token in enumerate(step.drafted, start=1):
            if token.text != tokens.alone(token.id):
                return f"step {step.index}'s drafted token {position}"
        for token in step.committed:
            written += 1
            if token.text != utf8.decode(tokens.of(token.id)):
                return f"output token {written}"
    return None


_kept: OrderedDict[int, tuple[weakref.ref, dict]] = OrderedDict()
_lock = threading.Lock()


def first_edited(comparison, method: str) -> str | None:
    """Where the lane's texts first differ from what its ids decode to, or None (they agree, or the comparison's
    tokenizer is not shipped here). Each comparison is checked once."""
    with _lock:
        kept = _kept.get(id(comparison))
        if kept is not None and kept[0]() is comparison:
            return kept[1].get(method)
    tokens = token_bytes(getattr(comparison, "preset", "") or "")
    found = {} if tokens is None else {m: lane_edited(lane, tokens) for m, lane in comparison.lanes.items()}
    try:
        ref = weakref.ref(comparison)
    except TypeError:
        return found.get(method)
    with _lock:
        _kept[id(comparison)] = (ref, found)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return found.get(method)
