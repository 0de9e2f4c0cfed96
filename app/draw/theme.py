"""Colours and their meanings, defined once (Okabe–Ito, safe for colour-blind viewers)."""

from engine.contract.methods import METHOD_REGISTRY

ACCEPTED = "#009E73"  # accepted draft token
REJECTED = "#D55E00"  # rejected draft token (also struck through)
BONUS = "#0072B2"  # token written by the target (also bold)
UNVERIFIED = "#999999"  # drafted, never verified (also dashed outline)
DRAFT_WORK = "#E69F00"  # draft spans on the timeline
VERIFY_WORK = "#0072B2"  # verify spans
HOST_WORK = "#999999"  # host spans
TRAIN_WORK = "#000000"  # a self-tuning drafter's training steps (engine/online.py): Okabe–Ito's black, unused elsewhere

WORK_COLOURS = {"draft": DRAFT_WORK, "verify": VERIFY_WORK, "host": HOST_WORK,
                "train": TRAIN_WORK}  # kinds of work on the timeline

# Each lane's one identity in its header and in every chart that draws lanes: a colour, and a marker as the second
# cue, from its registry entry (methods.Method.style). Spares for a lane the registry does not style, apart from the
# colours of the token verdicts.
OTHER_STYLES = (("#AA4499", "x"), ("#88CCEE", "cross"), ("#DDCC77", "pentagon"))


def lane_style(method: str) -> tuple[str, str]:
    """(colour, plotly marker symbol) of a lane, the same in every chart and in its header; a lane the table does not
    style (a server's) gets one of OTHER_STYLES, always the same for the same name."""
    entry = METHOD_REGISTRY.get(method)
    if entry is not None and all(entry.style):
        return entry.style
    return OTHER_STYLES[sum(map(ord, method)) % len(OTHER_STYLES)]


MARKER_GLYPHS = {"circle": "●", "square": "■", "diamond": "◆", "triangle-up": "▲", "star": "★", "x": "✕",
                 "triangle-down": "▼", "hourglass": "⧗",
                 "cross": "✚", "pentagon": "⬟", "hexagon": "⬢"}  # a lane's marker as its header shows it

CSS = f"""
.lane-card {{ font-family: ui-sans-serif, system-ui, sans-serif; }}
.lane-head {{ display: flex; flex-wrap: wrap; align-items: baseline; gap: .5em; margin-bottom: .3em; }}
.lane-name {{ font-size: 1.15em; font-weight: 700; }}
.lane-swatch {{ font-size: 1.1em; }}
.lane-card {{ border-left: 5px solid var(--lane-colour, transparent); padding-left: .5em; }}
.lane-desc {{ color: #666; font-size: max(11px, .9em); }}
.lane-drafter {{ font-size: max(11px, .8em);
                 padding: 0 .4em; border: 1px solid #ccc; border-radius: .6em; color: #444; }}
.lane-state {{ margin-left: auto; font-size: max(11px, .8em); color: #666; }}
.chips {{ display: flex; flex-wrap: wrap; gap: .4em; margin: .4em 0 .6em; }}
.chip {{ border: 1px solid #ccc; border-radius: 1em; padding: .1em .7em; font-size: max(11px, .9em);
         white-space: nowrap; }}
.chip b {{ font-variant-numeric: tabular-nums; }}
.chip.provisional {{ opacity: .55; border-style: dashed; }}
.chip .tag {{ font-size: max(11px, .75em); text-transform: uppercase; letter-spacing: .04em; color: #666; }}
.tokens {{ font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: max(11px, .85em);
          white-space: pre-wrap; word-break: break-word; line-height: 1.55; border: 1px solid #e5e5e5; border-radius: .4em;
          padding: .6em; max-height: 28em; overflow-y: auto; background: #fcfcfc; }}
.prompt-text {{ color: #888; }}
/* Text from a prompt, a file or a server: each in its own bidirectional box, so right-to-left letters in it
   never reorder the page around it (the explicit bidi controls are drawn as names: app/draw/render.py). */
.tokens, .prompt-text, .st-context, .st-text, .srv-text, .lane-drafter {{ unicode-bidi: isolate; }}
.tok {{ border-radius: .2em; cursor: help; }}
.tok.accepted {{ background: {ACCEPTED}33; box-shadow: inset 0 -2px 0 {ACCEPTED}; }}
.tok.bonus {{ color: {BONUS}; font-weight: 700; }}
.tok.rejected {{ color: {REJECTED}; text-decoration: line-through; background: {REJECTED}1a; }}
.tok.unverified {{ color: {UNVERIFIED}; outline: 1px dashed {UNVERIFIED}; outline-offset: -1px; }}
.tok.cut {{ color: {UNVERIFIED}; outline: 1px dashed {UNVERIFIED}; outline-offset: -1px; font-style: italic; }}
.cutmark {{ color: {UNVERIFIED}; font-size: max(11px, .8em); }}
.tok.ghost {{ font-size: max(11px, .85em); }}
.legend {{ display: flex; flex-wrap: wrap; gap: 1em; font-size: max(11px, .85em); margin: .2em 0; }}
.legend .tok {{ cursor: default; padding: 0 .3em; }}
.steps {{ margin-top: .5em; font-size: max(11px, .85em); overflow-x: auto; }}
.steps table {{ border-collapse: collapse; width: 100%; }}
.steps td {{ padding: .15em .4em; border-top: 1px solid #eee; vertical-align: top; }}
.steps td.block {{ font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }}
.steps td.block .note {{ word-break: normal; }}
.steps td.num {{ text-align: right; font-variant-numeric: tabular-nums; color: #555; }}
.sameness {{ font-size: max(11px, .9em); font-weight: 600; margin: .1em 0; }}
.sameness.same {{ color: {ACCEPTED}; }}
.sameness.differs {{ color: {REJECTED}; }}
.sameness.sample {{ color: #555; font-weight: 400; cursor: help; }}
.status-error {{ color: {REJECTED}; font-weight: 600; }}
.link-notes ul {{ margin: .2em 0 0 1.2em; padding: 0; }}
.link-notes li {{ font-weight: 400; }}
.note {{ color: #555; font-size: max(11px, .9em); }}
"""

# The Step-through tab (app/tabs/step.py): every lane's block at one step, token by token, large.
CSS += f"""
.st-lanes {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: .8em; }}
.st-lane {{ border: 1px solid #e5e5e5; border-radius: .5em; padding: .6em; background: #fcfcfc; min-width: 0; }}
.st-summary {{ font-size: max(11px, .85em); color: #444; margin: .2em 0; }}
.st-rule {{ font-size: max(11px, .9em);
            color: #333; margin: 0 0 .6em; padding: .3em .6em; border-left: 3px solid {BONUS}; background: #f6f9fc; }}
.st-context {{ font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: max(11px, .8em); color: #888;
              white-space: pre-wrap; word-break: break-all; margin-bottom: .4em; }}
.st-toks {{ display: flex; flex-wrap: wrap; gap: .4em; align-items: stretch; }}
.st-tree {{ margin-top: .5em; max-height: 26em; max-width: 100%; overflow: auto; border-top: 1px dashed #e5e5e5; padding-top: .4em; }}
.st-tok {{ border: 1px solid #ddd; border-radius: .4em; padding: .3em .45em; background: white; min-width: 6.2em;
          max-width: 100%; box-sizing: border-box;
          font-size: max(11px, .78em); }}
.st-tok.selected {{ border-color: #222; box-shadow: 0 0 0 2px #222; }}
.st-pos {{ color: #999; font-size: max(11px, .85em); }}
.st-text {{ font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 1.7em; text-align: center;
           margin: .15em 0 .3em; white-space: pre-wrap; overflow-wrap: anywhere; }}
.st-text .tok {{ cursor: default; padding: 0 .15em; }}
.st-nums {{ display: grid; grid-template-columns: auto auto; column-gap: .5em; }}
.st-label {{ color: #666; cursor: help; }}
.st-value {{ text-align: right; font-variant-numeric: tabular-nums; font-family: ui-monospace, monospace; }}
.st-verdict {{ margin-top: .2em; font-weight: 600; color: #444; }}
.st-tok[data-verdict="accepted"] .st-verdict {{ color: {ACCEPTED}; }}
.st-tok[data-verdict="rejected"] .st-verdict {{ color: {REJECTED}; }}
.st-bonus .st-verdict {{ color: {BONUS}; font-weight: 400; max-width: 9em; }}
.st-cut {{ color: {UNVERIFIED}; align-self: center; font-size: 1.3em; }}
.st-done {{ color: #666; font-style: italic; padding: 1em 0; }}
"""

# The Lesson tab (app/tabs/lesson.py) and the note a lesson point leaves on the tab it opens.
CSS += f"""
.lesson-point {{ padding: .6em .9em; margin-bottom: .6em; }}
.focus-note {{ border-left: 4px solid {BONUS}; background: #f3f8fc; padding: .5em .8em; font-size: max(11px, .95em); }}
"""
