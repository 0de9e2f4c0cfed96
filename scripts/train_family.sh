#!/usr/bin/env bash
# Retrain the embedded family, every stage in order, on one device:
#   bash scripts/train_family.sh [--device cuda] [--fresh] [--from STAGE] [--more]
# The family is trained around a target that grows: the drafters' first phases learn the 16-layer target, which
# then grows to 24 layers and trains on; every drafter's last phase (and the small LM drafter, and the greedy data)
# learns the grown target, the one shipped. Stages:
#   target         the 16-layer target, one cosine cycle
#   self-data      text that target writes (the drafters' first phases learn from it)
#   dflash dspark eagle3   their first phases on it (--greedy-steps 0)
#   grow           the target grown to 24 layers (same function), trained on, then unlikelihood against its loops
#   small-lm-drafter     distilled from the grown target
#   greedy-data    the grown target's greedy continuations
#   dflash-greedy dspark-greedy eagle3-greedy   each drafter's greedy phase on the grown target
#   sampled-data   the grown target's continuations sampled at temperature 1
#   dflash-sampled eagle3-sampled   each drafter's checkpoint for temperatures above 0: its shipped weights
#                  trained on in a distribution phase (assets/eagle3-drafter-sampled/; DFlash's, no longer shipped,
#                  is the forerunner of its one set below)
# The shipped DSpark and DFlash drafters are then made by scripts/train_breakout.sh: its dspark-d15 stage (the DSpark
# above, self-distilled at 15 drafts per block on greedy and sampled rows, calibrated at temperatures 0 and 1, serving
# both), copied from runs/dspark-selfdistill-d15/export/ into assets/dspark-drafter/, and its dflash-tv stage (the
# DFlash above, self-distilled on the same rows with DSpark's paper's loss, one set for both temperatures), copied
# from runs/dflash-selfdistill-tv/export/ into assets/dflash-drafter/.
# With --more (not the shipped family: an experiment toward a target with a lower loss, docs/experiments.md):
#   more           the grown target trained on: a further cosine cycle, then unlikelihood again (target --from-shipped)
#   more-small-lm-drafter, more-greedy-data   the small LM drafter distilled anew, greedy continuations anew, from that target
#   dflash-more dspark-more eagle3-more   each drafter one more greedy phase on it, from the weights it had
#   dflash-more2 dspark-more2   the block drafters a second such round (their own seeds, runs/<stage>-more2)
#   card           measures the shipped models, and runs the bench for its speed table (quiet, then --busy)
# (The tokenizer and held-out prompts are kept: `python -m engine.train tokenizer` remakes them, and then
# everything after must be retrained too.)
# Each stage resumes from its checkpoints in runs/ when cut off (a drafter's greedy stage resumes its finished
# earlier phases and trains only the last); --fresh deletes the checkpoints of every stage it runs first (do it
# after changing a stage's shape, or the target: drafters trained on another target must not resume).
# Every drafter learns from the target as then in assets/target, so the order matters.
# Logs go to runs/<stage>.log. On a GPU the corpus token cache runs/tokens.pt travels with the tree (the
# corpus is read from this machine's Python library, which another machine may not have).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python
device=cpu fresh=0 from=target more=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --from) from=$2; shift 2 ;;
    --more) more=1; shift ;;
    *) echo "error: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
GROW="--grow-layers 24 --grow-steps 800 --unloop-steps 100"
MORE="--from-shipped --steps 2000 --unloop-steps 100"
stages=(target self-data dflash dspark eagle3 grow small-lm-drafter greedy-data dflash-greedy dspark-greedy eagle3-greedy
        sampled-data dflash-sampled eagle3-sampled)
[ $more = 1 ] && stages+=(more more-small-lm-drafter more-greedy-data dflash-more dspark-more eagle3-more dflash-more2 dspark-more2)
stages+=(card)
command_of() {  # the `python -m engine.train` arguments of a stage
  case "$1" in
    dflash|dspark|eagle3) echo "$1 --greedy-steps 0" ;;
    grow) echo "target $GROW" ;;
    *-greedy) echo "${1%-greedy}" ;;
    *-sampled) echo "${1%-sampled} --sampled" ;;
    more) echo "target $MORE" ;;
    more-*) echo "${1#more-}" ;;
    *-more|*-more2) echo "${1%-more*} --from-shipped" ;;
    *) echo "$1" ;;
  esac
}
checkpoints_of() {  # what --fresh deletes before a stage runs
  case "$1" in
    target|small-lm-drafter|dflash|dspark|eagle3) echo "runs/$1" ;;
    grow) echo "runs/target/grow" ;;
    dflash-greedy|dspark-greedy) echo "runs/${1%-greedy}/cycle2/self/greedy" ;;
    eagle3-greedy) echo "runs/eagle3/greedy" ;;
    *-sampled) echo "runs/$1" ;;
    more) echo "runs/target-more" ;;
    *-more|*-more2) echo "runs/$1" ;;
  esac
}
started=0
for stage in "${stages[@]}"; do
  [ "$stage" = "$from" ] && started=1
  [ $started = 1 ] || continue
  if [ $fresh = 1 ] && [ -n "$(checkpoints_of "$stage")" ]; then rm -rf "$(checkpoints_of "$stage")"; fi
  echo "$(date +%H:%M:%S) $stage on $device (log: runs/$stage.log)"
  if [ "$stage" = card ]; then
    # The card's speed table: the bench on the CPU (where the card measures), quiet and with a busy core.
    : > "runs/$stage.log"
    for busy in "" --busy; do
      "$PYTHON" -m engine.measure.bench --device cpu --max-new-tokens 64 --drafts-per-step serial=4,one_pass=7 --no-hf $busy \
        --json "runs/card-bench${busy:+-busy}.json" >> "runs/$stage.log" 2>&1
    done
    "$PYTHON" -m engine.train card --bench runs/card-bench.json --bench runs/card-bench-busy.json >> "runs/$stage.log" 2>&1
  else
    # shellcheck disable=SC2046  # the stage's arguments are words
    "$PYTHON" -m engine.train $(command_of "$stage") --device "$device" > "runs/$stage.log" 2>&1
  fi
done
[ $started = 1 ] || { echo "error: no stage named $from" >&2; exit 2; }
echo "$(date +%H:%M:%S) done"
