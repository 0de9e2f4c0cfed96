#!/usr/bin/env bash
# The stage loop the background training scripts share (sourced, not run): `run_stages STAGE...` runs each stage
# in order as `python -m engine.train <its arguments> --threads 1`, logging to runs/<stage>.log, and skips a stage
# whose output exists. The sourcing script defines `stage_done STAGE` (true once the stage's output exists) and
# `command_of STAGE` (its `python -m engine.train` arguments). A cut stage resumes from its checkpoints. A stage
# another loop is running (it holds runs/<stage>.lock) is skipped: two loops started side by side share the stages
# out, one core each.
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python
run_stages() {
  mkdir -p runs
  local stage lock
  for stage in "$@"; do
    if stage_done "$stage"; then echo "$(date +%H:%M:%S) $stage: done already"; continue; fi
    exec {lock}> "runs/$stage.lock"
    if ! flock -n "$lock"; then
      echo "$(date +%H:%M:%S) $stage: running in another loop, skipped"
      exec {lock}>&-
      continue
    fi
    echo "$(date +%H:%M:%S) $stage (log: runs/$stage.log)"
    # shellcheck disable=SC2046  # the stage's arguments are words
    "$PYTHON" -m engine.train $(command_of "$stage") --threads 1 >> "runs/$stage.log" 2>&1
    exec {lock}>&-
  done
  echo "$(date +%H:%M:%S) done"
}
