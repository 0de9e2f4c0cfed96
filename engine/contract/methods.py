"""The registry of methods and drafter kinds: everything SpecLab knows about a method lives in one entry.

A **method** is a lane of the comparison (its name, label, one-line description, default draft length,
and which drafter kinds may serve it). A **drafter kind** is a checkpoint format with the module that
implements it; that module provides

    recognises(config: dict) -> bool          does a checkpoint's config.json belong to this kind?
    load(path, device, dtype) -> model       build the network and load the weights (path None: a kind
                                             without weights builds what it needs from nothing)
    owns(model) -> bool                      did this kind build `model`? (for models built by hand)
    build(model, engine) -> Drafter          the object the speculative loop talks to (drafters/base.py)

so the engine, CLI, app, bench, model card and training read this file and never name a method
themselves: a lane's style (colour, marker) and capabilities (batched, tree, ablation, how it drafts) are on its
Method, and every table of lanes derives from them (method_names, methods_where); code that speaks of one method in
particular uses its name here (EAGLE3, DFLASH, ...). Adding a drafter is one module under `engine/drafters/` plus
one entry here (its DrafterKind, and its Method naming that kind; tests/test_method_registry.py does it in a copy
of the tree); a method registered at run time (entries added to METHOD_REGISTRY and DRAFTER_KINDS) appears in the
lanes, the bench and the About text alike. A kind without weights
(`weights=False`) needs no checkpoint and no preset entry: every engine builds it.

Torch-free on purpose: the app (which imports no torch) reads names, labels and defaults from here. The seam to
the drafter modules is `DrafterKind.module`, an import path: `engine.drafters.implementation(kind)` imports it
when a model is loaded, so this file never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DrafterKind:
    name: str
    label: str  # shown in the lane header: which drafter the lane ran
    module: str  # import path of the module with recognises / load / owns / build (engine.drafters.implementation)
    weights: bool = True  # False: built without a checkpoint, for every engine (no preset names it)
    features: bool = False  # its drafter reads the target's hidden states (not the tokens alone)


@dataclass(frozen=True)
class Variant:
    """A method run with one switch changed, measured beside it by the bench (its name: method_suffix)."""

    suffix: str
    overrides: tuple[tuple[str, object], ...]  # GenerationConfig fields and their values
    on_card: bool = False  # the model card's speed table shows it too
    words: str = ""  # what is changed, in words ("without its Markov head")


@dataclass(frozen=True)
class Method:
    name: str  # used in the CLI, the JSON trace, URLs and element ids
    label: str
    description: str  # one line under the lane's name
    default_drafts: int  # K (serial drafters) or tokens per block (one-pass drafters); 0 = drafts nothing
    one_pass: bool  # True: the whole block in one forward (the app's "tokens per block" setting)
    kinds: tuple[str, ...]  # drafter kinds that can serve this method, tried in order; () = no drafter
    paper: str = ""
    about: str = ""  # a paragraph on what the method is (the About tab, the Space's README)
    cuts: bool = False  # a scheduler may verify fewer tokens than were drafted (its confidences say how many)
    # what its drafter proposes above temperature 0 by default: "sample" (draws from q) or "argmax" (q's likeliest
    # token as a point mass); both lossless (presets.PROPOSALS)
    proposal: str = "sample"
    variants: tuple[Variant, ...] = ()
    # Variants that draft with a checkpoint trained apart (Preset.ablation_drafters, chosen by their overrides'
    # drafter_weights), measured only where the engine has it (Engine.ablation_drafter_models): the bench and the
    # variant sweep run `variants` on every engine, so these are not among them (engine/measure/lesson.py ablation)
    ablations: tuple[Variant, ...] = ()
    # A tree lane drafts with the drafter of the chain method `grows_from` (no checkpoint of its own), and the module
    # at `tree_module` turns that drafter into one that drafts a tree of GenerationConfig.tree_nodes tokens
    # (engine.models.tree_grower imports it; engine/tree.py verifies the tree).
    grows_from: str = ""
    tree_module: str = ""
    # runs with several requests at once (engine/batch.py): its drafter has a batch form (engine/drafters/batched.py
    # batched); without one the lane runs one request at a time, and the batched tables leave it out
    batched: bool = False
    # the lane's one identity in its header and every chart that draws lanes: a colour and a plotly marker symbol
    # (Paul Tol's "muted" scheme, safe for colour-blind viewers); empty: the app picks one from its spares
    style: tuple[str, str] = ("", "")

    @property
    def tree(self) -> bool:
        return bool(self.grows_from)

    @property
    def ablation(self) -> bool:
        """Has a variant drafting with a checkpoint trained apart (`ablations`)."""
        return bool(self.ablations)

    @property
    def drafts(self) -> bool:
        """False for the baseline: the target alone."""
        return bool(self.kinds)

    @property
    def drafting(self) -> str:
        """How it drafts, the group a draft length is set for: "serial" (one forward a token) or "one_pass"."""
        return "one_pass" if self.one_pass else "serial"


# Each built-in method's id, for code that speaks of one method in particular (a preset's checkpoints, a lesson's
# words, a paper's figures); lists of lanes come from the registry (method_names, methods_where), never by hand.
BASELINE, EAGLE3, CLASSIC, DFLASH, DSPARK = "baseline", "eagle3", "classic", "dflash", "dspark"
EAGLE3_TREE, DFLASH_TREE = "eagle3_tree", "dflash_tree"

# Checkpoint formats, in the order they are recognised (the first whose `recognises` says yes wins).
DRAFTER_KINDS: dict[str, DrafterKind] = {k.name: k for k in (
    DrafterKind("eagle3", "EAGLE-3", "engine.drafters.eagle3", features=True),
    DrafterKind("deepspec", "DeepSpec", "engine.drafters.deepspec", features=True),  # DeepSpec's DSpark, and DFlash
    DrafterKind("dflash", "DFlash", "engine.drafters.dflash", features=True),
    DrafterKind("small-lm", "small LM", "engine.drafters.small_lm"),
)}

METHOD_REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("baseline", "Baseline", "target only: one target forward per token", 0, False, (),
           about="the target alone, one forward per token. Every other lane must write exactly its text at "
                 "temperature 0.",
           batched=True, style=("#444444", "circle")),
    Method("eagle3", "AR", "drafts K tokens one forward at a time, then one verify", 4, False,
           ("eagle3", "small-lm"),
           "EAGLE-3, arXiv 2503.01840 (a small LM when the preset has no EAGLE-3)",
           about="a one-layer EAGLE-3 drafter reads the target's hidden states (three or five of its layers, "
                 "fused by a linear layer) with the last token's embedding and drafts K tokens, one forward each, "
                 "feeding its own hidden state back (Li et al., EAGLE-3, arXiv 2503.01840; DeepSpec's checkpoint "
                 "format). The target then verifies all K in one forward. Drafting cost grows with K: the serial "
                 "ceiling.",
           batched=True, style=("#CC6677", "square")),
    Method("classic", "Classic", "a small LM drafts K tokens, one forward each, then one verify", 4, False,
           ("small-lm",), "Leviathan et al. 2023, arXiv 2211.17192",
           about="classic speculative decoding: a small language model with the target's tokenizer drafts K "
                 "tokens, one forward each, from the tokens alone (Leviathan et al. 2023, Fast Inference from "
                 "Transformers via Speculative Decoding).",
           batched=True, style=("#999933", "diamond")),
    Method("dflash", "DFlash", "drafts a whole block in one parallel pass", 7, True, ("deepspec", "dflash"),
           "DFlash, arXiv 2602.06036",
           about="a block-diffusion drafter drafts the whole block in one parallel forward, conditioned on the "
                 "target's hidden states injected as keys and values (DFlash, arXiv 2602.06036). Lesson point 7 "
                 "measures what that conditioning buys against the same recipe trained without those states.",
           variants=(Variant("overlap_on", (("overlap", True),), words="overlap on"),
                     Variant("overlap_off", (("overlap", False),), words="overlap off")),
           # the same recipe without KV injection (engine/train `dflash --no-target-features`): what it buys
           ablations=(Variant("no_features", (("drafter_weights", "no_features"),),
                              words="trained without the target's features"),),
           batched=True, style=("#332288", "triangle-up")),
    Method("dspark", "DSpark", "one-pass block, Markov head, confidence-scheduled verify", 7, True,
           ("deepspec",), "DSpark, deepseek-ai/DeepSpec",
           about="DFlash's one-pass backbone, a cheap low-rank Markov head that samples the block left to right, "
                 "and a calibrated confidence head whose scheduler decides how much of the block to verify "
                 "(Cheng et al., PKU × DeepSeek-AI, code in deepseek-ai/DeepSpec).",
           cuts=True,
           variants=(Variant("verify_all", (("scheduler", "none"),), on_card=True, words="verifying the whole block"),
                     Variant("static_cut", (("scheduler", "static"),), words="with the static cut"),
                     # the backbone drafting alone, every token verified: beside verify_all, what the head buys
                     Variant("no_markov", (("markov_head", False), ("scheduler", "none")),
                             words="without its Markov head, verifying the whole block")),
           batched=True, style=("#44AA99", "star")),
    Method("eagle3_tree", "AR tree", "grows a tree one draft forward per level, then one verify", 4, False,
           ("eagle3",), "EAGLE-2's dynamic tree, arXiv 2406.16858", grows_from="eagle3",
           tree_module="engine.drafters.eagle_tree",
           about="EAGLE-3's drafter grows a tree (EAGLE-2's dynamic draft tree, Li et al., arXiv 2406.16858): each "
                 "level is one draft forward over the likeliest leaves so far, which adds their likeliest children; "
                 "the likeliest nodes overall, up to the node budget, are verified in one target forward with an "
                 "attention mask that lets each node see its ancestors only. Every level costs another serial "
                 "forward.",
           style=("#882255", "hourglass")),
    Method("dflash_tree", "DFlash tree", "one parallel pass, the likeliest prefixes as a tree, one verify", 7, True,
           ("deepspec", "dflash"), "DDTree, arXiv 2604.12989", grows_from="dflash",
           tree_module="engine.drafters.ddtree",
           about="DDTree over the DFlash drafter: one parallel pass gives a distribution for every position of the "
                 "block; the likeliest prefixes under the node budget (best first, scored by the product of their "
                 "tokens' probabilities) form a tree, verified in one target forward with an ancestor-only mask. "
                 "Many candidates for the price of one draft forward.",
           style=("#117733", "triangle-down")),
)}

# Method ids a link, a saved comparison or the command line may still use, and the id each now has.
LEGACY_METHOD_IDS = {"ar": "eagle3"}


def method_id(name):
    """The registry's id for `name`: itself, or the id a legacy one became (anything else comes back as it is)."""
    return LEGACY_METHOD_IDS.get(name, name) if isinstance(name, str) else name


# BASELINE: the method every other lane is compared with (and must equal at temperature 0)
DEFAULT_METHOD = EAGLE3  # the CLI's method when none is named
DEFAULT_LANES = (BASELINE, EAGLE3, DFLASH, DSPARK)  # the app's lanes unless a visitor picks others
assert BASELINE in METHOD_REGISTRY and not METHOD_REGISTRY[BASELINE].drafts
assert DEFAULT_METHOD in METHOD_REGISTRY and set(DEFAULT_LANES) <= set(METHOD_REGISTRY)
assert not any(m.tree and m.batched for m in METHOD_REGISTRY.values()), "trees do not run in a batch"


def method_names() -> tuple[str, ...]:
    """Every registered method, in display order (read at call time, so a method registered later counts)."""
    return tuple(METHOD_REGISTRY)


METHODS = method_names()  # the methods known at import; code that must see later registrations calls method_names


def method(name: str) -> Method:
    return METHOD_REGISTRY[name]


def methods_where(**wanted) -> tuple[str, ...]:
    """The registered methods (display order, read at call time) whose attributes equal `wanted`, e.g.
    methods_where(tree=False) for the chains, methods_where(batched=True), methods_where(drafts=True, one_pass=True)."""
    return tuple(name for name, entry in METHOD_REGISTRY.items()
                 if all(getattr(entry, key) == value for key, value in wanted.items()))


def method_label(name: str) -> str:
    """A method's label, or the name itself for one this registry does not know (a file from elsewhere)."""
    entry = METHOD_REGISTRY.get(name)
    return entry.label if entry else name


def kind_label(kind: str) -> str:
    return DRAFTER_KINDS[kind].label


def reads_features(method_name: str) -> bool:
    """A chain method whose first drafter kind reads the target's hidden states (DrafterKind.features)."""
    entry = METHOD_REGISTRY[method_name]
    return entry.drafts and not entry.tree and DRAFTER_KINDS[entry.kinds[0]].features


def weightless_kind(method_name: str) -> DrafterKind | None:
    """The kind without weights that serves `method_name`, if one does (every engine then builds it)."""
    kinds = (DRAFTER_KINDS[k] for k in METHOD_REGISTRY[method_name].kinds)
    return next((kind for kind in kinds if not kind.weights), None)
