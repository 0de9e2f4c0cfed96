"""The held-out prompts' kinds: the labelling rule on small continuations, and the shipped file's labels."""

import json

from engine.contract.presets import HELDOUT_PROMPTS, load_prompts
from scripts.label_prompts import KINDS, label, masked_lines, prose_share

CODEC = ("\n    return codecs.CodecInfo(\n        name='{}',\n        encode=Codec().encode,\n"
         "        decode=Codec().decode,\n    )\n")
DOCSTRING = ('\n    """Return the size of the chunk.\n\n    The size counts the header too.\n    """\n'
             "    return self.size\n")
LOGIC = "\n    if pos < 0:\n        raise ValueError('negative')\n    self.file.seek(self.offset + pos, 0)\n"


def test_prose_share_counts_comments_and_strings_even_one_left_open():
    assert prose_share("x = 1\n") == 0
    assert prose_share("# all comment\n") == 1
    assert prose_share('"""open docstring never closed') == 1
    assert 0.3 < prose_share("call('a # b')  # c\n") < 0.8
    assert prose_share(DOCSTRING) > 0.5 > prose_share(LOGIC)


def test_masked_lines_drop_names_in_strings_numbers_comments_and_docstrings():
    assert masked_lines(CODEC.format("cp850")) == masked_lines(CODEC.format("mac_roman"))
    assert masked_lines("x = 12  # twelve\n'''doc'''\n") == ["x=N"]


def test_each_rule_gives_its_kind():
    rows = [{"source": "a.py"}, {"source": "b.py"}, {"source": "c.py"}, {"source": "d.py"}]
    kinds = label(rows, [CODEC.format("a"), CODEC.format("b"), DOCSTRING, LOGIC])
    assert kinds == ["regular code", "regular code", "prose-like", "free code"]
    # templated lines shared only within one module are not another module's: free code
    same_module = [{"source": "a.py"}, {"source": "a.py"}]
    assert label(same_module, [CODEC.format("a"), CODEC.format("b")]) == ["free code", "free code"]


def test_every_shipped_held_out_prompt_has_a_kind_and_the_readers_still_read_its_prompts():
    rows = [json.loads(line) for line in HELDOUT_PROMPTS.read_text(encoding="utf-8").splitlines()]
    assert {row["kind"] for row in rows} == set(KINDS)
    assert all(set(row) == {"source", "prompt", "kind"} for row in rows)
    assert load_prompts() == [row["prompt"] for row in rows]
    codecs = [row["kind"] for row in rows
              if row["source"].startswith("encodings/") and "getregentry" in row["prompt"][-30:]]
    assert codecs and set(codecs) == {"regular code"}
