"""What the tests and the scripts both need to drive the app: a free loopback port, a headless chromium, and every
chart of a page drawn."""

from __future__ import annotations

import shutil
import socket

# Debian's chromium, driven through playwright: headless, sandbox off (the tests run as root), and none of its
# background traffic (this machine's network is closed, and each refused connection would slow the page)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def launch_chromium(playwright):
    """Chromium from a running `sync_playwright()`."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)


def free_port() -> int:
    """A loopback port free when asked (another process may take it before it is bound: callers retry)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The page draws a chart only once it is near the screen, within a screen of the view (app/draw/projector.py; one
# waiting is `.chart-waiting`): the shown charts that wait, and of them those near the view (none should be)
WAITING_CHARTS_JS = """() => [...document.querySelectorAll('.chart-waiting')].filter(p => p.offsetParent !== null)"""
NEAR_CHARTS_WAITING_JS = f"""() => ({WAITING_CHARTS_JS})().filter(p => {{ const box = p.getBoundingClientRect();
  return box.bottom > -innerHeight && box.top < 2 * innerHeight; }}).map(p => p.id)"""

# True once every chart shown (on the open tab, not folded) is drawn, the page scrolled to each waiting chart in turn
# as a reader would, then back to where it was; false while one near the view waits
DRAW_SHOWN_JS = f"""() => {{
  if (({NEAR_CHARTS_WAITING_JS})().length) return false;
  const waiting = ({WAITING_CHARTS_JS})();
  window.speclabWalkFrom = window.speclabWalkFrom ?? scrollY;
  if (!waiting.length) {{
    scrollTo(0, window.speclabWalkFrom);
    delete window.speclabWalkFrom;
    return true;
  }}
  scrollTo(0, scrollY + waiting[0].getBoundingClientRect().top - innerHeight);
  return false;
}}"""


# Every chart shown drawn, its tick labels at projector mode's size (`room` true: 18 px or more) or the page's; a
# chart drawn for a room in either mode (`.drawn-for-a-room`) only drawn, since the switch does not redraw it
CHARTS_DRAWN_FOR_JS = """(room) => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent !== null)
  .every(p => p.querySelector('.main-svg') && (p.closest('.drawn-for-a-room') ||
    [...p.querySelectorAll('.xtick text')].every(t => (parseFloat(getComputedStyle(t).fontSize) >= 18) === room)))"""


def draw_shown_charts(page, timeout_ms: int = 30_000) -> None:
    """Bring every chart on the page's open tab near the screen in turn, and wait until each is drawn (before a
    whole-page screenshot, or a check of every chart)."""
    page.evaluate("() => { delete window.speclabWalkFrom; }")
    page.wait_for_function(DRAW_SHOWN_JS, timeout=timeout_ms, polling=100)
