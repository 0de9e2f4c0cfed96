"""Does the page distort the figures it shows? The app's lanes against the engine's own CLI, same settings.

    python scripts/app_timing.py [--repeats 3] [--tokens 64 512] [--json runs/app_timing.json]
    python scripts/app_timing.py --budgets [--repeats 1] [--points 8 ...]


Starts the app (`python -m app`) on a free port, then, for each length and repeat, runs one comparison of
every lane through the app's queue as a browser page does (scripts/app_client.py, every streamed byte
counted) and each lane once more through `python -m engine generate --warm-up` (a fresh process per lane;
the app's server is idle meanwhile). Prints each lane's tokens/s both ways (medians over the repeats), their
ratio, and the bytes the comparison streamed to the client. Run it on an otherwise idle machine: it
measures the page's own effect, and anything else on the cores hides it.

--budgets: the seconds from a press to the final numbers, as a visitor waits for them: the Compare tab's Run
with the page's default settings (its default lanes, 64 new tokens), then each lesson point's "Run it live" (its
button's press outside the queue, then the measurement through the queue), each on a fresh session, against the
budgets BUDGET_COMPARE_S and BUDGET_LIVE_S; --points times only those lesson points' Run it live.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from engine.contract.methods import DEFAULT_LANES  # noqa: E402  torch-free
from scripts.app_client import ROOT, App, start_app
from scripts.support import free_port, launch_chromium

METHODS = list(DEFAULT_LANES)  # the app's default lanes
PROMPT = "def moving_average(values, window):\n    \"\"\"Return the moving averages of values over window.\"\"\"\n"
TOKENS_PER_S = re.compile(r'tokens/s <b>([0-9.]+)</b>')


def app_run(app: App, fn_index: int, max_new_tokens: int) -> tuple[dict[str, float], int, float]:
    """One comparison of every lane through the app; each lane's tokens/s as the page shows it, the bytes
    streamed and the wall seconds."""
    result = app.call(fn_index, [PROMPT, METHODS, 0.0, 4, 7, max_new_tokens, "0", "rejection", True, "throughput",
                                 0.5, "auto"])
    status = result["outputs"][0] if result["outputs"] else result["error"]
    if not result["ok"] or "done" not in status:
        raise SystemExit(f"the app's run did not finish: {status}")
    lanes = result["outputs"][1:]
    rates = {}
    for method in METHODS:
        lane = next(v for v in lanes if isinstance(v, str) and f'data-method="{method}"' in v)
        rates[method] = float(TOKENS_PER_S.search(lane).group(1))
    return rates, result["bytes"], result["seconds"]


class BrowserClient:
    """The same comparison from a real page in chromium on this machine (what a visitor on the same
    laptop sees): each run opens a share link, which runs it; bytes are those the page's event stream read."""

    def __init__(self, base: str):
        from playwright.sync_api import sync_playwright

        self.base, self._p = base, sync_playwright().start()
        self.browser = launch_chromium(self._p)
        self.seed = 0

    def run(self, max_new_tokens: int) -> tuple[dict[str, float], int, float]:
        from urllib.parse import urlencode

        self.seed += 1  # a fresh configuration each time: a link seen before would replay its recorded run
        query = urlencode({"prompt": PROMPT, "methods": ",".join(METHODS), "max_new_tokens": max_new_tokens,
                           "seed": self.seed})
        page = self.browser.new_page(viewport={"width": 1500, "height": 1300})
        received, streams = [0], set()  # bytes of the page's event streams, counted by the browser itself
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.requestWillBeSent",
               lambda e: streams.add(e["requestId"]) if "/queue/data" in e["request"]["url"] else None)
        cdp.on("Network.dataReceived",
               lambda e: received.__setitem__(0, received[0] + e["dataLength"]) if e["requestId"] in streams else None)
        start = time.monotonic()
        page.goto(f"{self.base}?{query}")
        page.wait_for_function("document.querySelector('#status')?.innerText.includes('done')", timeout=600_000)
        wall = time.monotonic() - start
        rates = {}
        for method in METHODS:
            chip = page.locator(f"#lane-{method} .chip", has_text="tokens/s").first.inner_text()
            rates[method] = float(re.search(r"([0-9.]+)\s*$", chip).group(1))
        page.close()
        return rates, received[0], wall

    def close(self):
        self.browser.close()
        self._p.stop()


BUDGET_COMPARE_S = 12.0  # the default comparison's final numbers, on a quiet 2-core machine
BUDGET_LIVE_S = 15.0  # every lesson point's "Run it live"


def status_words(value) -> str:
    """The plain words of a status line (its HTML tags dropped)."""
    return re.sub(r"<[^>]+>", "", value if isinstance(value, str) else str(value)).strip()


def budgets(app: App, repeats: int, points: list[int] | None = None) -> list[dict]:
    """Each timed press: what, the seconds to its final numbers, whether it ended well, and its last words; with
    `points`, only those points' Run it live."""
    from app.lesson import POINTS

    values = {c["id"]: c.get("props", {}).get("value") for c in app.config["components"]}
    run = app.fn_index(api_name="run")
    defaults = [values[i] for i in next(d for d in app.config["dependencies"] if d["id"] == run)["inputs"]]
    rows = []
    for repeat in range(repeats):
        if not points:
            result = app.call(run, defaults)
            status = status_words(result["outputs"][0] if result["outputs"] else result["error"])
            rows.append({"what": "default comparison", "budget_s": BUDGET_COMPARE_S, "seconds": result["seconds"],
                         "ok": result["ok"] and status.startswith("done"), "words": status[:90]})
            print(rows[-1], flush=True)
        for point in POINTS:
            if points and point.number not in points:
                continue
            suffix = "" if point.number == 1 else f"_{point.number - 1}"
            session = f"budget-{repeat}-{point.number}"
            start = time.monotonic()
            app.call(app.fn_index(api_name=f"prepare_live{suffix}"), [], session=session)
            result = app.call(app.fn_index(api_name=f"run_live{suffix}"), [], session=session)
            seconds = time.monotonic() - start
            first = result["outputs"][0] if result["outputs"] else result["error"]
            words = status_words(first) if point.tab == "compare" else status_words(result["error"] or "measured")
            rows.append({"what": f"Run it live, point {point.number}", "budget_s": BUDGET_LIVE_S,
                         "seconds": seconds, "ok": result["ok"] and (point.tab != "compare" or
                                                                     words.startswith("done")),
                         "words": words[:90]})
            print(rows[-1], flush=True)
    return rows


def cli_run(method: str, max_new_tokens: int) -> float:
    out = subprocess.run([sys.executable, "-m", "engine", "generate", "--method", method, "--prompt", PROMPT,
                          "--max-new-tokens", str(max_new_tokens), "--warm-up", "--json", "-"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["summary"]["tokens_per_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--budgets", action="store_true",
                        help="time the default comparison and every lesson point's Run it live to their final numbers")
    parser.add_argument("--points", type=int, nargs="+", help="with --budgets: only these lesson points' Run it live")
    parser.add_argument("--browser", action="store_true",
                        help="run the app's side from a chromium page on this machine instead of a bare client")
    args = parser.parse_args()

    port = free_port()
    server = start_app(port)
    if args.budgets:
        try:
            rows = budgets(App(f"http://127.0.0.1:{port}/"), args.repeats, args.points)
        finally:
            server.terminate()
            server.wait(timeout=30)
        print("\n| press | seconds to final numbers | budget | ended |\n|---|---|---|---|")
        for row in rows:
            print(f"| {row['what']} | {row['seconds']:.1f} | {row['budget_s']:.0f} | "
                  f"{'yes' if row['ok'] else 'no: ' + row['words']} |")
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
        return 0
    report = {}
    try:
        app = App(f"http://127.0.0.1:{port}/")
        run = app.fn_index(api_name="run")
        browser = BrowserClient(f"http://127.0.0.1:{port}/") if args.browser else None
        for n in args.tokens:
            app_rates, cli_rates, streamed, walls = {m: [] for m in METHODS}, {m: [] for m in METHODS}, [], []
            for repeat in range(args.repeats):
                rates, size, wall = browser.run(n) if browser else app_run(app, run, n)
                streamed.append(size)
                walls.append(wall)
                for m in METHODS:
                    app_rates[m].append(rates[m])
                    cli_rates[m].append(cli_run(m, n))
                print(f"{n} tokens, repeat {repeat + 1}: app {rates}, cli "
                      f"{ {m: round(cli_rates[m][-1], 1) for m in METHODS} }, {size / 1e6:.2f} MB streamed", flush=True)
            rows = {m: {"app_tokens_per_s": statistics.median(app_rates[m]),
                        "cli_tokens_per_s": round(statistics.median(cli_rates[m]), 1)} for m in METHODS}
            for row in rows.values():
                row["app_over_cli"] = round(row["app_tokens_per_s"] / row["cli_tokens_per_s"], 3)
            report[n] = {"lanes": rows, "streamed_bytes_median": int(statistics.median(streamed)),
                         "comparison_wall_s_median": round(statistics.median(walls), 2)}
        if browser:
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)

    for n, result in report.items():
        print(f"\n{n} new tokens ({args.repeats} repeats, medians); one comparison streamed "
              f"{result['streamed_bytes_median'] / 1e6:.2f} MB in {result['comparison_wall_s_median']} s")
        print("| lane | app tokens/s | CLI tokens/s | app / CLI |\n|---|---|---|---|")
        for m, row in result["lanes"].items():
            print(f"| {m} | {row['app_tokens_per_s']:.0f} | {row['cli_tokens_per_s']:.0f} | {row['app_over_cli']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
