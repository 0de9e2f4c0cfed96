"""What every chart of the page shares: the colours and dashes that mean one thing in every chart, a lane's line,
the page's small-chart layout (one line of title, the rest in a wrapped subtitle; legends under the axis title) and
projector mode's layout for a room (`for_projector`). Pure functions over plotly figures."""

from __future__ import annotations

import plotly.graph_objects as go

from .theme import lane_style

HERE_COLOUR = "#555555"  # a figure measured on this machine, beside published ones
PUBLISHED_COLOUR = "#BBBBBB"  # a published figure (a paper's, on its GPU)
PREDICTION_DARK = "#8A3F73"  # a second prediction beside the first, in a darker shade of the same hue
PREDICTION_COLOUR = "#CC79A7"  # predictions beside measurements (reddish purple)
PREDICTION_DASH = "dash"  # predictions are dashed, measurements solid with markers (predictions are labelled)
AR_COLOUR = lane_style("eagle3")[0]  # the prediction tab's measured sweep is the AR lane's
SURVIVAL_DASH = "dot"  # survival (positions 1..k all passing) beside a lane's solid conditional acceptance


def lane_line(method: str, **extra) -> dict:
    """A lane's line and markers in its one colour and marker (app/draw/theme.py lane_style)."""
    colour, marker = lane_style(method)
    return dict(line=dict(color=colour, **extra.pop("line", {})), marker=dict(color=colour, symbol=marker, size=8),
                **extra)


# --- projector mode: every chart's text through its own layout, for the back row -----------------------------

PROJECTOR_FONT = 18  # the smallest text of any chart in projector mode
PROJECTOR_TITLE_FONT = 24
PROJECTOR_TITLE_CHARS = 48  # characters of a 24-pixel title that fit a chart of the page at 1024 pixels
PROJECTOR_SUBTITLE_CHARS = 84


def for_projector(fig: go.Figure) -> go.Figure:
    """The figure as a room reads it: all its text at least PROJECTOR_FONT pixels (axes, ticks, legend, bar labels,
    annotations, hover), the legend below the plot in wrapped horizontal rows, margins grown to fit every label
    (automargin), the title above the plot area with room of its own, and a taller plot. Set through the
    figure's layout, so plotly lays the larger text out itself."""
    height = fig.layout.height or 300
    fig.update_layout(
        font=dict(size=PROJECTOR_FONT), height=int(max(460, height * 1.6)),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0, xanchor="left",
                    font=dict(size=PROJECTOR_FONT), entrywidthmode="pixels"),
        margin=dict(l=10, r=20, t=90 if fig.layout.title.text else 30, b=10, autoexpand=True),
        uniformtext=dict(minsize=PROJECTOR_FONT, mode="show"),
        hoverlabel=dict(font=dict(size=PROJECTOR_FONT)))
    for trace in fig.data:  # one chart a row: a legend entry on one line again
        if trace.name and "<br>" in trace.name:
            trace.name = trace.name.replace("<br>", " ")
    if fig.layout.title.text:
        title, subtitle = split_title(fig.layout.title.text, fig.layout.title.subtitle.text or "",
                                      PROJECTOR_TITLE_CHARS)
        fig.layout.title.text = title  # the subtitle's own line breaks kept (a half-width chart's), long lines broken
        fig.layout.title.subtitle.text = "<br>".join(wrapped(line, PROJECTOR_SUBTITLE_CHARS)
                                                     for line in subtitle.split("<br>"))
        above = [a for a in fig.layout.annotations or () if a.yref == "paper" and (a.y or 0) >= 1]
        if above and subtitle:  # panel titles sit above the plot, under the subtitle's lines: room for both
            fig.update_layout(margin_t=90 + 30 * (1 + fig.layout.title.subtitle.text.count("<br>")))
        fig.update_layout(title=dict(font=dict(size=PROJECTOR_TITLE_FONT), automargin=True, yref="container",
                                     y=0.98, yanchor="top", x=0, xanchor="left", xref="container",
                                     subtitle=dict(font=dict(size=PROJECTOR_FONT))))
    fig.update_xaxes(automargin=True, tickfont=dict(size=PROJECTOR_FONT), title=dict(font=dict(size=PROJECTOR_FONT),
                                                                                        standoff=12))
    fig.update_yaxes(automargin=True, tickfont=dict(size=PROJECTOR_FONT), title=dict(font=dict(size=PROJECTOR_FONT),
                                                                                        standoff=12))
    fig.update_traces(textfont=dict(size=PROJECTOR_FONT), selector=dict(type="bar"))
    fig.update_traces(textfont=dict(size=PROJECTOR_FONT), selector=dict(type="scatter"))
    for annotation in fig.layout.annotations or ():
        annotation.font.size = max(annotation.font.size or 0, PROJECTOR_FONT)
    # the legend's rows below the plot: plotly wraps them; the bottom margin leaves room for the x-axis title
    legend_rows = _legend_rows(fig)
    fig.update_layout(margin=dict(b=40 + 34 * legend_rows))
    return fig


def _legend_rows(fig: go.Figure) -> int:
    """About how many rows a wrapped horizontal legend takes in a chart one projector row wide."""
    names = [t.name or "" for t in fig.data if t.showlegend is not False and t.name]
    if not names:
        return 0
    per_row, rows, used = 90, 1, 0  # characters of legend text one row holds at PROJECTOR_FONT
    for name in names:
        width = len(name) + 6
        if used and used + width > per_row:
            rows, used = rows + 1, 0
        used += width
    return rows


def styled(fig: go.Figure, projector: bool) -> go.Figure:
    return for_projector(fig) if projector else fig


SMALL_CHART_CHARS = 44  # characters of 14-pixel title text that fit a chart three to a row at 1024 pixels
LEGEND_CHARS = 30  # characters of a legend entry that fit one line of such a chart


def wrapped(text: str, width: int) -> str:
    """Text broken into lines of at most `width` characters at its spaces (plotly's <br>): plotly never wraps."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join(lines + [line])


def split_title(title: str, subtitle: str, chars: int) -> tuple[str, str]:
    """A title of one line of at most `chars` characters (plotly draws a title of several lines above its own
    anchor, out of the figure): its words before a colon, or the first that fit, stay; the rest opens the
    subtitle, which may take several lines (`wrapped`)."""
    title = title.replace("<br>", " ")
    if len(title) <= chars:
        return title, subtitle
    colon = title.find(": ")
    head = title[:colon] if 0 < colon <= chars else title[:chars + 1].rsplit(" ", 1)[0]
    rest = title[len(head):].lstrip(": ")
    return head, f"{rest}. {subtitle}" if subtitle else rest


def _small_layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> go.Figure:
    """A chart of the page's (three to a row at 1024 pixels, one a row in projector mode): a title longer than a
    row keeps one line and opens its subtitle with the rest; legend entries wrap to fit."""
    title, subtitle = split_title(title, "", SMALL_CHART_CHARS)
    for trace in fig.data:
        if trace.name and len(trace.name) > LEGEND_CHARS and "<br>" not in trace.name:
            trace.name = wrapped(trace.name, LEGEND_CHARS)
    legend_lines = sum(1 + (t.name or "").count("<br>") for t in fig.data if t.showlegend is not False and t.name)
    below = 50 + 9 * legend_lines  # about two entries a row: the legend's rows under the x-axis title
    fig.update_layout(title=dict(text=title, font=dict(size=14), automargin=True,
                                 yref="container", y=0.98, yanchor="top", x=0.01, xanchor="left", xref="container",
                                 subtitle=dict(text=wrapped(subtitle, SMALL_CHART_CHARS + 8), font=dict(size=12))),
                      height=300 + 9 * legend_lines, margin=dict(l=10, r=10, t=40, b=below),
                      uniformtext=dict(minsize=11, mode="show"),  # bar labels never shrunk below the page's 11 px
                      xaxis_title=x_title, yaxis_title=y_title, plot_bgcolor="white",
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0))
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    return fig


def _error_bars(cells: list[dict]) -> dict:
    return dict(type="data", symmetric=False, array=[c["high"] - c["mean"] for c in cells],
                arrayminus=[c["mean"] - c["low"] for c in cells], thickness=1.2, width=4)
