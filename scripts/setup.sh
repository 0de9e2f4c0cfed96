#!/usr/bin/env bash
# Create .venv (once), install requirements.txt into it, then the project itself (editable, pyproject.toml) so that
# engine, app and scripts import from anywhere. Run by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Reinstall only when requirements.txt changed since the last successful install.
stamp=.venv/.requirements.sha256
want=$( (cat requirements.txt pyproject.toml; ls -d */__init__.py) | sha256sum | cut -d' ' -f1)  # and the packages it installs
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # pip would compile every installed file to bytecode, on one core; compileall does it on all cores, and only for the
  # files the app and the tests can import. Without bytecode, each test process would compile torch and transformers
  # anew where PYTHONDONTWRITEBYTECODE is set. Left out, about half of the files and 13 to 21 s on these 2 cores
  # (docs/experiments.md): trees nothing here imports (transformers' other model families, packages' own test suites, plotly's
  # other trace types, torch's compiler back ends, sympy's physics); Python still compiles any of them on import if
  # one is ever needed (tests/test_setup.py checks that none is). Its status is ignored: a few files of torch's own
  # are not Python 3.11.
  .venv/bin/python -m pip install --quiet --no-compile -r requirements.txt
  unused='/site-packages/(pip|setuptools|networkx)/|/tests/|/transformers/models/(?!(auto|qwen3|encoder_decoder)/|__init__)'
  unused+='|/plotly/graph_objs/(?!_?(bar|scatter|layout|figure|deprecations)\b|__init__)'
  unused+='|/torch/_inductor/(codegen|fx_passes|kernel)/|/sympy/(physics|combinatorics|stats)/'
  # Two compileall processes, one a core, over halves of about equal work (torch and sympy; the rest): `-j 0` hands
  # out one file at a time from a single walking process and kept 1.2 of the 2 cores busy (14 s against 9 s).
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  .venv/bin/python -m compileall -q -x "$unused" "$site/torch" "$site/sympy" >/dev/null 2>&1 &
  half=$!
  .venv/bin/python -m compileall -q -x "$unused|/site-packages/(torch|sympy)/" "$site" >/dev/null 2>&1 || true
  wait "$half" || true
  # The project itself, as links to this checkout: with the venv's own setuptools (no download), or pip's default.
  .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null 2>&1 ||
    .venv/bin/python -m pip install --quiet --no-deps -e .
  echo "$want" > "$stamp"
fi
