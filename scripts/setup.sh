#!/usr/bin/env bash
# Create .venv (once), install requirements.txt into it, then the project itself (editable, pyproject.toml) so that
# engine, app and scripts import from anywhere. Run by run.sh and test.sh. Each step says what it does; pip's own
# output goes to .venv/install.log (shown when a step fails); the last line says the install is ready.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
log=.venv/install.log
step() { echo "setup: $*"; }
failed() { echo "setup: failed: $1; the end of $log:" >&2; tail -n 20 "$log" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
# Reinstall only when requirements.txt changed since the last successful install.
stamp=.venv/.requirements.sha256
want=$( (cat requirements.txt pyproject.toml; ls -d */__init__.py) | sha256sum | cut -d' ' -f1)  # and the packages it installs
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  : > "$log"
  step "installing the packages of requirements.txt into .venv (a few minutes the first time; pip's output: $log)"
  .venv/bin/python -m pip install --quiet --upgrade pip >>"$log" 2>&1 || failed "upgrading pip"
  # pip would compile every installed file to bytecode, on one core; compileall does it on all cores, and only for the
  # files the app and the tests can import. Without bytecode, each test process would compile torch and transformers
  # anew where PYTHONDONTWRITEBYTECODE is set. Left out, about half of the files and 13 to 21 s on these 2 cores
  # (docs/experiments.md): trees nothing here imports (transformers' other model families, packages' own test suites, plotly's
  # other trace types, torch's compiler back ends, sympy's physics); Python still compiles any of them on import if
  # one is ever needed (tests/test_setup.py checks that none is). Its status is ignored: a few files of torch's own
  # are not Python 3.11.
  .venv/bin/python -m pip install --quiet --no-compile -r requirements.txt >>"$log" 2>&1 ||
    failed "installing requirements.txt"
  unused='/site-packages/(pip|setuptools|networkx)/|/tests/|/transformers/models/(?!(auto|qwen3|encoder_decoder)/|__init__)'
  unused+='|/plotly/graph_objs/(?!_?(bar|scatter|layout|figure|deprecations)\b|__init__)'
  unused+='|/torch/_inductor/(codegen|fx_passes|kernel)/|/sympy/(physics|combinatorics|stats)/'
  # Two compileall processes, one a core, over halves of about equal work (torch and sympy; the rest): `-j 0` hands
  # out one file at a time from a single walking process and kept 1.2 of the 2 cores busy (14 s against 9 s).
  step "compiling the installed packages to bytecode, on every core"
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  .venv/bin/python -m compileall -q -x "$unused" "$site/torch" "$site/sympy" >/dev/null 2>&1 &
  half=$!
  .venv/bin/python -m compileall -q -x "$unused|/site-packages/(torch|sympy)/" "$site" >/dev/null 2>&1 || true
  wait "$half" || true
  # The project itself, as links to this checkout: with the venv's own setuptools (no download), or pip's default.
  step "installing SpecLab itself into .venv (editable: links to this checkout)"
  .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e . >>"$log" 2>&1 ||
    .venv/bin/python -m pip install --quiet --no-deps -e . >>"$log" 2>&1 || failed "installing SpecLab itself"
  echo "$want" > "$stamp"
  echo "setup: ready: .venv holds every package and SpecLab itself"
else
  echo "setup: ready: .venv is up to date with requirements.txt"
fi
