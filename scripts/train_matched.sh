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
  esac
}
stage_needs() {  # the stages whose rows a stage reads
  case "$1" in
    eagle3-matched | small-lm-matched) echo "self-data greedy-data sampled-data" ;;
  esac
}
command_of() {  # the `python -m engine.train` arguments of a stage
  case "$1" in
    self-data) echo "self-data" ;;
    greedy-data) echo "greedy-data --steps 2048" ;;
    sampled-data) echo "sampled-data --steps 1024" ;;
    eagle3-matched) echo "eagle3 --matched" ;;
    small-lm-matched) echo "small-lm-drafter --matched" ;;
  esac
}
run_stages self-data greedy-data sampled-data eagle3-matched small-lm-matched
