#!/usr/bin/env bash
# Create .venv (once) and install requirements.txt into it. Sourced by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Reinstall only when requirements.txt changed since the last successful install.
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # pip compiles every installed file to bytecode on one core; compileall does the same on all of them (half
  # the time on 2 cores). Without the bytecode, each test process would compile torch and transformers anew where
  # PYTHONDONTWRITEBYTECODE is set. Its status is ignored: a few files of torch's own tests are not Python 3.11.
  .venv/bin/python -m pip install --quiet --no-compile -r requirements.txt
  .venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    >/dev/null 2>&1 || true
  echo "$want" > "$stamp"
fi
