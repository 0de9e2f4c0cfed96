#!/usr/bin/env bash
# The block drafters at z-lab's block size, and EAGLE-3 matched with them, on one CPU core:
#   setsid nohup bash scripts/train_breakout.sh >> runs/train_breakout.log 2>&1 < /dev/null &
# Stages, in order; each is skipped once its output exists, and a cut stage resumes from its checkpoints:
#   greedy-data    2048 greedy continuations of the shipped target           -> runs/greedy.pt
#   sampled-data   1024 continuations sampled at temperature 1               -> runs/sampled.pt
#   dflash-d15     the shipped DFlash drafter trained on at block 16 (15 drafts), position-weighted CE (γ 7) on
#                  the tokens the target wrote in both sets                   -> runs/dflash-selfdistill-d15/
#   dspark-d15     the shipped DSpark drafter at 15 drafts, its paper's 0.1 CE + 0.9 TV + BCE on both sets
#                                                                             -> runs/dspark-selfdistill-d15/
#   dflash-tv      the shipped DFlash drafter at its 7 drafts, DSpark's paper's 0.1 CE + 0.9 TV with DFlash's
#                  position weights on both sets: one set for both temperatures -> runs/dflash-selfdistill-tv/
#   eagle3-matched the shipped EAGLE-3 drafter on the same rows, the same steps and batch (its 7 serial steps)
#                                                                             -> runs/eagle3-selfdistill/
# Each drafter stage exports to export/ in its runs/ folder (DSpark's one export calibrated at temperatures 0
# and 1, for both), never to assets/: the engine loads none of them until they are copied there.
# One torch thread per stage; logs go to runs/<stage>.log. STEPS (default 2000) sets every drafter's steps.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stages.sh
source scripts/stages.sh
STEPS=${STEPS:-2000}
stage_done() {  # the file a finished stage leaves
  case "$1" in
    greedy-data) [ -f runs/greedy.json ] ;;
    sampled-data) [ -f runs/sampled.json ] ;;
    dflash-d15) [ -f runs/dflash-selfdistill-d15/export/training.json ] ;;
    dspark-d15) [ -f runs/dspark-selfdistill-d15/export/training.json ] ;;
    dflash-tv) [ -f runs/dflash-selfdistill-tv/export/training.json ] ;;
    eagle3-matched) [ -f runs/eagle3-selfdistill/export/training.json ] ;;
  esac
}
stage_needs() {  # the stages whose rows a stage reads
  case "$1" in
    dflash-d15 | dspark-d15 | dflash-tv | eagle3-matched) echo "greedy-data sampled-data" ;;
  esac
}
command_of() {  # the `python -m engine.train` arguments of a stage
  case "$1" in
    greedy-data) echo "greedy-data --steps 2048" ;;
    sampled-data) echo "sampled-data --steps 1024" ;;
    dflash-d15) echo "dflash --self-distill --drafts 15 --steps $STEPS" ;;
    dspark-d15) echo "dspark --self-distill --drafts 15 --steps $STEPS" ;;
    dflash-tv) echo "dflash --self-distill --tv-loss --steps $STEPS" ;;
    eagle3-matched) echo "eagle3 --self-distill --steps $STEPS" ;;
  esac
}
run_stages greedy-data sampled-data dflash-d15 dspark-d15 dflash-tv eagle3-matched
