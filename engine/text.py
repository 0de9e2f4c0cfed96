"""From token ids to text, one token at a time, without ever splitting a character.

Byte-level BPE tokens are byte strings, so a token may end inside a multi-byte UTF-8 character (emoji,
accented letters). `IncrementalDecoder` feeds the bytes through an incremental UTF-8 decoder: a token
that ends mid-character adds "" and the token that completes it carries the whole character, so the
pieces always join to exactly the decoded output. Special tokens add nothing to the text, as with
`tokenizer.decode(ids, skip_special_tokens=True)`.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """Inverse of byte-level BPE's byte-to-printable-character table (GPT-2 and its successors), which
    transformers defines; imported here, when a tokenizer's table is first built, not with this module."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


_NOT_A_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # lone surrogates that do not stand for a raw byte


def repair_text(text: str) -> str:
    """Text any encoder accepts: a lone surrogate becomes U+FFFD, and one that stands for an undecodable byte
    (surrogateescape: a command line cut mid-character) becomes that byte again, read as UTF-8. The engine
    encodes, and the app draws and sends, only repaired text, so all of them see the same characters."""
    return _NOT_A_BYTE.sub("\ufffd", text).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class TokenTexts:
    """Per-token bytes of one tokenizer, built once, and the text helpers the trace needs."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.special_ids = frozenset(tokenizer.all_special_ids)
        self._bytes = self._byte_table(tokenizer)
        self._size = len(tokenizer)
        self._texts: dict[int, str] = {}  # token_text's answers: a trace asks for the same few ids again and again

    def _byte_table(self, tokenizer) -> list[bytes] | None:
        """Each token's bytes when the tokenizer is byte-level BPE; None means decode through the tokenizer."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or type(backend.decoder).__name__ != "ByteLevel":
            return None
        table = _unicode_to_byte()
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        out = []
        for token_id, piece in enumerate(pieces):
            if token_id in self.special_ids or piece is None:
                out.append(b"")
            elif all(ch in table for ch in piece):
                out.append(bytes(table[ch] for ch in piece))
            else:  # an added plain-text token: its characters are literal
                out.append(piece.encode("utf-8"))
        return out

    def token_text(self, token_id: int) -> str:
        """How one token reads on its own (special tokens by name, split characters as U+FFFD, ids past
        the tokenizer's vocabulary as [id N])."""
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self._text_of(token_id)
        return text

    def _text_of(self, token_id: int) -> str:
        if token_id >= self._size:  # real models pad their vocabulary (Qwen3: 151936 rows, 151669 tokens)
            return f"[id {token_id}]"
        if token_id in self.special_ids or self._bytes is None:
            return self.tokenizer.decode([token_id], skip_special_tokens=False)
        return self._bytes[token_id].decode("utf-8", errors="replace")

    def decoder(self) -> "IncrementalDecoder":
        return IncrementalDecoder(self)


class IncrementalDecoder:
    """Turns committed ids into text pieces; the pieces of a run join to its decoded output."""

    def __init__(self, texts: TokenTexts):
        self._texts = texts
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ids: list[int] = []
        self._emitted = ""

    def push(self, token_id: int) -> str:
        table = self._texts._bytes
        if table is not None:  # an id past the vocabulary (padding rows) writes nothing, as decode() does
            return self._utf8.decode(table[token_id] if token_id < len(table) else b"")
        # Generic tokenizers: decode the whole output and emit what is new once it is stable.
        self._ids.append(token_id)
        text = self._texts.tokenizer.decode(self._ids, skip_special_tokens=True)
        if text.endswith("\ufffd") or not text.startswith(self._emitted):
            return ""
        piece, self._emitted = text[len(self._emitted):], text
        return piece

    def finish(self) -> str:
        """What is left at the end: a character cut off by the stop, as U+FFFD."""
        if self._texts._bytes is not None:
            return self._utf8.decode(b"", final=True)
        text = self._texts.tokenizer.decode(self._ids, skip_special_tokens=True)
        piece, self._emitted = text[len(self._emitted):], text
        return piece
