"""What the tests and the scripts both need to drive the app: a free loopback port and a headless chromium."""

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
