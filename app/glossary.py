"""The words the pages use without stopping to explain them, each explained once.

`GLOSSARY` is the one place they are written: the About tab lists them all (`glossary_markdown`), and where a
term first appears in a label the page cannot stop to explain (a drafter's name, a published figure), `hover`
gives the definitions for a title= tooltip. Plain strings, no gradio.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """One term: its anchor id on the About tab, how it is written, what finds it in a label, its meaning."""

    key: str
    name: str
    pattern: str  # a regular expression (case-insensitive) that finds the term in a label
    meaning: str


GLOSSARY = (
    Term("anchor", "anchor", r"\banchor\b|\bdrafts per block\b",
         "The newest committed token. Each verify forward starts from it, and a block drafter (DFlash, DSpark) puts "
         "it in the first place of its block. Checkpoints count it differently (z-lab's DFlash block of 8 holds the "
         "anchor and 7 drafts; DeepSpec's block of 7 holds 7 drafts), so every lane header here counts the drafts "
         "only: “7 drafts per block”."),
    Term("markov-head", "Markov head (vanilla, gated, rnn)", r"\bMarkov head\b",
         "DSpark's small head that samples the block left to right, each token seeing the one drafted before it, on "
         "top of the one parallel pass. “Vanilla” is its plain kind; gated and rnn are the other two kinds a "
         "checkpoint can carry."),
    Term("greedy", "greedy (temperature 0)", r"\bgreedy\b",
         "At temperature 0 every token is the model's most likely one (its argmax). A draft is then accepted "
         "exactly when it is the target's own greedy choice; the two probabilities do not enter."),
    Term("rejection-rule", "rejection rule", r"\brejection rule\b",
         "Above temperature 0, the default: a draft d passes with probability min(1, p_target(d) / p_draft(d)), "
         "decided by a uniform draw r; at the first rejection the target draws its own token from what is left. "
         "The output keeps exactly the target's odds."),
    Term("match-rule", "match rule", r"\bmatch rule\b",
         "Above temperature 0, the other choice (More settings): the target draws its own token at every position "
         "and a draft passes while it equals that draw (probability p_target). Also keeps the target's odds, but "
         "accepts less often than the rejection rule."),
    Term("acceptance-rate", "acceptance rate (acc. rate)", r"\bacc(eptance|\.) rate\b",
         "Accepted drafts over the drafts the rule judged: those sent to the target, up to and including each step's "
         "first rejection (the drafts after it are sent but never judged, and a draft the scheduler cut is not sent). "
         "The lane chip “acc. rate”, the Lesson's point 3 and the per-position charts use this one definition. A "
         "server lane reports its own counters instead, accepted over every drafted token sent, and its chip says "
         "so: “accepted / drafted”."),
    Term("conditional-acceptance", "conditional acceptance, survival", r"\bconditional acceptance\b|\bsurvival\b",
         "Per position k of a block. Conditional acceptance: among the steps whose drafts 1..k−1 all passed and that "
         "sent draft k, the share in which draft k passed too; it can rise or fall along the block. Survival: the "
         "share of steps whose drafts 1..k all passed, the running product of the conditional rates; it can only "
         "fall. τ grows by each position's survival."),
    Term("tau", "τ (tokens per step)", r"τ",
         "The tokens a verify step commits on average: the drafts accepted in it plus the one the target writes "
         "itself. The chart of accepted drafts per step shows how it spreads."),
    Term("unverified", "unverified, cut", r"\b(unverified|cut)\b",
         "Unverified: drafted after a rejection, so never judged (nothing after a rejected token can be kept). "
         "Cut: drafted, but a scheduler (DSpark's) left it out of the verify forward."),
    Term("node-budget", "node budget, verified node", r"\bnode budget\b|\bverified nodes?\b|\bup to \d+ nodes\b",
         "A tree lane drafts several candidates per position; each drafted token is a node, and the node budget is "
         "the most nodes the target verifies in one forward, each seeing only its ancestors. A verified node is one "
         "of them: the verify costs more the more nodes it checks. A chain verifies one node per drafted position."),
    Term("published", "EAGLE-3 (16), EAGLE-3 (60), DFlash (16), b16", r"\(\d+\)|\bb\d+\b",
         "In the published figures, the number in brackets is how many drafted tokens the target verifies in one "
         "step: EAGLE-3 with a draft tree of 16 or of 60 tokens, DFlash with a block of 16 (“b16”, as in the "
         "names of z-lab's DFlash checkpoints)."),
)


def meaning(key: str) -> str:
    """One term's meaning, by its key."""
    return next(t.meaning for t in GLOSSARY if t.key == key)


def hover(label: str) -> str:
    """The meanings of the glossary terms found in `label`, one per line, for a title= tooltip ("" if none)."""
    return "\n".join(f"{t.name}: {t.meaning}" for t in GLOSSARY if re.search(t.pattern, label, flags=re.I))


def glossary_markdown() -> str:
    """Every term with its meaning, each with an anchor (#glossary-<key>) to link to."""
    items = "\n".join(f'- <span id="glossary-{t.key}"></span>**{html.escape(t.name)}**: {t.meaning}'
                      for t in GLOSSARY)
    return f"### Words used on these pages\n{items}\n"
