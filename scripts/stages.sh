#!/usr/bin/env bash
# The stage loop the background training scripts share (sourced, not run): `run_stages STAGE...` runs each stage
# in order as `python -m engine.train <its arguments> --threads $THREADS` (default 1; THREADS=2 for a loop left alone
# on both cores), logging to runs/<stage>.log, and skips a stage
# whose output exists. The sourcing script defines `stage_done STAGE` (true once the stage's output exists) and
# `command_of STAGE` (its arguments), and may define `module_of STAGE` for a stage that runs another module than
# engine.train (a measurement of what a training stage exported). A cut stage resumes from its checkpoints. A stage
# another loop is running (it holds runs/<stage>.lock) is skipped: two loops started side by side share the stages
# out, one core each. A stage waits, before it starts, for the stages it reads that another loop is still running
# (`stage_needs STAGE`, where the sourcing script defines it): no training stage starts on half-written rows. Such a
# stage goes after the rest of the list (and with it any stage that reads it), so a loop that has finished its own
# drafter measures it at once instead of waiting hours for the other loop's.
# Started by setsid (a process session of its own), a loop lowers that whole session's priority: under the kernel's
# autogroup scheduling, nice alone weighs a process only against its own session, so a niced loop would still take a
# core from the app or the tests beside it.
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python
THREADS=${THREADS:-1}
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
  echo 19 > /proc/self/autogroup 2>/dev/null || true
fi
declare -F stage_needs >/dev/null || stage_needs() { :; }
declare -F module_of >/dev/null || module_of() { echo engine.train; }
wait_for_needs() {  # wait out the stages $1 reads that another loop runs; false when one of them is still not done
  local need wait
  for need in $(stage_needs "$1"); do
    stage_done "$need" && continue
    echo "$(date +%H:%M:%S) $1: waiting for $need"
    exec {wait}> "runs/$need.lock"
    flock "$wait"
    exec {wait}>&-
    stage_done "$need" || { echo "$(date +%H:%M:%S) $1: $need did not finish (runs/$need.log); skipped"; return 1; }
  done
}
held_elsewhere() {  # true when a stage $1 reads is in the list $2.. put off, or not done and another loop runs it now
  local need probe
  for need in $(stage_needs "$1"); do
    [[ " ${*:2} " == *" $need "* ]] && return 0
    stage_done "$need" && continue
    exec {probe}> "runs/$need.lock"
    if ! flock -n "$probe"; then exec {probe}>&-; return 0; fi
    exec {probe}>&-
  done
  return 1
}
run_stages() {  # each stage in order; one that reads what another loop is still making goes after the rest
  mkdir -p runs
  local stage later=()
  for stage in "$@"; do
    if ! stage_done "$stage" && held_elsewhere "$stage" "${later[@]}"; then later+=("$stage"); continue; fi
    run_stage "$stage"
  done
  for stage in "${later[@]}"; do run_stage "$stage"; done
  echo "$(date +%H:%M:%S) done"
}
run_stage() {
  local stage=$1 lock
  if stage_done "$stage"; then echo "$(date +%H:%M:%S) $stage: done already"; return; fi
  exec {lock}> "runs/$stage.lock"
  if ! flock -n "$lock"; then
    echo "$(date +%H:%M:%S) $stage: running in another loop, skipped"
    exec {lock}>&-
    return
  fi
  if ! wait_for_needs "$stage"; then exec {lock}>&-; return; fi
  echo "$(date +%H:%M:%S) $stage (log: runs/$stage.log)"
  # shellcheck disable=SC2046  # the stage's arguments are words
  "$PYTHON" -m "$(module_of "$stage")" $(command_of "$stage") --threads "$THREADS" >> "runs/$stage.log" 2>&1
  exec {lock}>&-
}
