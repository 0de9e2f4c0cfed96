"""What the browser does to draw the Why tab and to redraw it for the room, timed in headless chromium against a
running app:

    .venv/bin/python -m app --port 7861 &
    .venv/bin/python -m scripts.chart_draws --url http://127.0.0.1:7861/ [--rounds 3] [--run]

Each round opens the page afresh at 1024×768, opens the Why tab and waits until every chart shown is drawn, then
switches projector mode on and waits until every chart shown is drawn at the room's size (a chart far below the view
is drawn only once it comes near: what a reader waits for). With --run, each round first presses Run on the default
comparison and waits until it is done (chromium's share of a run's CPU, beside the engine's). It prints, for each round,
the seconds each took, chromium's CPU seconds for each (its processes, read from /proc: nothing else should run chromium
meanwhile), and the draws the page counted (`window.speclabChartDraws`, one per chart and new value).
"""

from __future__ import annotations

import argparse
from statistics import median
import time
from pathlib import Path

from scripts.support import CHARTS_DRAWN_FOR_JS, launch_chromium

# A chart shown on the page, and every one shown drawn for `room` (scripts/support.py)
DRAWN_JS = f"""(room) => [...document.querySelectorAll('.js-plotly-plot')].some(p => p.offsetParent !== null)
  && ({CHARTS_DRAWN_FOR_JS})(room)"""
SETTLE_MS = 1500  # after the charts read as drawn: what the page still does (the CPU counted, not the seconds)


def chromium_cpu() -> dict[int, float]:
    """Each chromium process's user and system CPU seconds so far, by pid."""
    seconds = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended meanwhile
            continue
        name, fields = text.split("(", 1)[1].rsplit(")", 1)
        if "chrom" in name:
            values = fields.split()
            seconds[int(stat.parent.name)] = (int(values[11]) + int(values[12])) / 100  # utime, stime: 1/100 s
    return seconds


def cpu_since(before: dict[int, float]) -> float:
    """Chromium's CPU seconds since `before`: a process that has ended since counts nothing (the page closed
    before, whose renderer may end meanwhile), one started since counts all it used."""
    return sum(now - before.get(pid, 0.0) for pid, now in chromium_cpu().items())


def timed(page, action, room: bool) -> tuple[float, float]:
    """(seconds until every shown chart is drawn for `room`, chromium's CPU seconds including SETTLE_MS after)."""
    cpu, started = chromium_cpu(), time.perf_counter()
    action()
    page.wait_for_function(DRAWN_JS, arg=room, polling=100, timeout=60_000)
    seconds = time.perf_counter() - started
    page.wait_for_timeout(SETTLE_MS)
    return seconds, cpu_since(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7860/")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run", action="store_true", help="press Run first and time the comparison")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as playwright:
        context = launch_chromium(playwright).new_context(viewport={"width": 1024, "height": 768})
        for round_ in range(1, args.rounds + 1):
            page = context.new_page()
            page.goto(args.url)
            page.wait_for_load_state("networkidle")
            if args.run:
                cpu, started, drawn = chromium_cpu(), time.perf_counter(), page.evaluate("window.speclabChartDraws")
                page.click("#run")
                page.wait_for_selector("#status :text('done')", timeout=300_000)
                seconds = time.perf_counter() - started
                page.wait_for_timeout(SETTLE_MS)
                print(f"round {round_}: a run {seconds:.2f} s (chromium {cpu_since(cpu):.2f} s CPU), "
                      f"{page.evaluate('window.speclabChartDraws') - drawn} draws")
            why = timed(page, lambda: page.get_by_role("tab", name="Why").click(), room=False)
            counted = "window.speclabChartDraws ?? null"  # a page without the count (an older commit): null
            drawn = page.evaluate(counted)
            room = timed(page, lambda: page.locator("#projector input").check(), room=True)
            charts = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
            draws = "not counted" if drawn is None else f"{page.evaluate(counted) - drawn} draws"
            rows.append((why, room))
            print(f"round {round_}: Why opened {why[0]:.2f} s (chromium {why[1]:.2f} s CPU); projector switch "
                  f"{room[0]:.2f} s (chromium {room[1]:.2f} s CPU), {draws} for {charts} charts")
            page.close()
    print(f"median: Why {median([w[0] for w, _ in rows]):.2f} s, {median([w[1] for w, _ in rows]):.2f} s CPU; "
          f"projector switch {median([r[0] for _, r in rows]):.2f} s, {median([r[1] for _, r in rows]):.2f} s CPU")


if __name__ == "__main__":
    main()
