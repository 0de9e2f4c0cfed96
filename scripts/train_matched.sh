#!/usr/bin/env bash
# EAGLE-3 and the small LM on the block drafters' budget, on one CPU core (hours: the 16,800 steps of DSpark's
# schedule at 1-3 s a step):
#   setsid nohup bash scripts/train_matched.sh >> runs/train_matched.log 2>&1 < /dev/null &
# Started twice side by side, the two loops train EAGLE-3 and the small LM at once, one core each (a stage another loop
# is running is skipped, and a training stage waits for the rows the other loop is still writing: scripts/stages.sh).
# Stages, in order; each is skipped once its output exists, and a cut stage resumes from its checkpoints:
#   self-data       text the shipped target writes itself                        -> runs/selfdata.pt
#   greedy-data     2048 greedy continuations (the rows DSpark's self-distillation used) -> runs/greedy.pt
#   sampled-data    1024 continuations sampled at temperature 1                  -> runs/sampled.pt
#   eagle3-matched  a fresh EAGLE-3 through DSpark's schedule phase for phase    -> runs/eagle3-matched/export/
#   small-lm-matched  the small LM likewise, its own distillation loss throughout -> runs/small-lm-matched/export/
#   eagle3-beside   the export beside the shipped EAGLE-3, in one run (K = 4, 7; T = 0, 1; scripts/weights_beside.py,
#                   one core, beside whatever the other core runs)            -> runs/eagle3-matched/beside.json
#   small-lm-beside the same for the small LM (the classic lane)              -> runs/small-lm-matched/beside.json
# Nothing goes to assets/: the engine drafts with an export once it is copied to assets/<stage> (then record
# everything again: python -m scripts.record). Logs: runs/<stage>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stages.sh
source scripts/stages.sh
stage_done() {  # the file a finished stage leaves
  case "$1" in
    self-data) [ -f runs/selfdata.pt ] ;;
    greedy-data) [ -f runs/greedy.json ] ;;
    sampled-data) [ -f runs/sampled.json ] ;;
    eagle3-matched) [ -f runs/eagle3-matched/export/training.json ] ;;
    small-lm-matched) [ -f runs/small-lm-matched/export/training.json ] ;;
    eagle3-beside) [ -f runs/eagle3-matched/beside.json ] ;;
    small-lm-beside) [ -f runs/small-lm-matched/beside.json ] ;;
  esac
}
stage_needs() {  # the stages whose output (rows, an export) a stage reads
  case "$1" in
    eagle3-matched | small-lm-matched) echo "self-data greedy-data sampled-data" ;;
    eagle3-beside) echo "eagle3-matched" ;;
    small-lm-beside) echo "small-lm-matched" ;;
  esac
}
module_of() {  # the module a stage runs
  case "$1" in
    *-beside) echo "scripts.weights_beside" ;;
    *) echo "engine.train" ;;
  esac
}
command_of() {  # the `python -m engine.train` arguments of a stage
  case "$1" in
    self-data) echo "self-data" ;;
    greedy-data) echo "greedy-data --steps 2048" ;;
    sampled-data) echo "sampled-data --steps 1024" ;;
    eagle3-matched) echo "eagle3 --matched" ;;
    small-lm-matched) echo "small-lm-drafter --matched" ;;
    eagle3-beside) echo "eagle3=runs/eagle3-matched/export $BESIDE --json runs/eagle3-matched/beside.json" ;;
    small-lm-beside) echo "classic=runs/small-lm-matched/export $BESIDE --json runs/small-lm-matched/beside.json" ;;
  esac
}
BESIDE="--drafts-per-step 4,7 --temperature 0,1 --limit 24 --max-new-tokens 64"
run_stages self-data greedy-data sampled-data eagle3-matched small-lm-matched eagle3-beside small-lm-beside
