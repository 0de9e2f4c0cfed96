#!/usr/bin/env bash
# Install what is needed and run the whole test suite: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
# The browser tests drive Debian's chromium; install it when missing and we may (root with apt), in the
# background while pip installs the Python packages (a fresh machine spends its first minute on these two).
chromium_install=""
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Without its recommended packages (printing, avahi, perl web libraries, udev): 37 packages instead of 107.
  (apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >/dev/null 2>&1 &
  chromium_install=$!
fi
bash scripts/setup.sh
if [ -n "$chromium_install" ] && ! wait "$chromium_install"; then
  echo "warning: could not install chromium; browser tests will be skipped" >&2
fi
# Two worker processes, one test file each at a time (module fixtures load once): the tests run torch on one
# thread (tests/conftest.py), so two workers use both cores of these machines. `-n 0` runs them serially.
# Files go out in collection order, the longest first (tests/conftest.py), not xdist's most-tests-first: that
# left the browser tests (few, long) for last, one worker busy with them while the other had finished.
exec .venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder "$@"
