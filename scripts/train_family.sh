#!/usr/bin/env bash
# Retrain the embedded family, every stage in order, on one device:
#   bash scripts/train_family.sh [--device cuda] [--fresh] [--from STAGE]
# Stages: target ar-drafter self-data greedy-data dflash dspark eagle3 card (the tokenizer and held-out prompts are kept:
# `python -m engine.train tokenizer` remakes them, and then everything after must be retrained too).
# Each stage resumes from runs/<stage>/ckpt.pt when cut off; --fresh deletes those checkpoints first (do it
# after changing a stage's shape, or the target: drafters trained on another target must not resume).
# Every drafter learns from the target as shipped in assets/target, so the order matters.
# Logs go to runs/<stage>.log. On a GPU the corpus token cache runs/tokens.pt travels with the tree (the
# corpus is read from this machine's Python library, which another machine may not have).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python
device=cpu fresh=0 from=target
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --from) from=$2; shift 2 ;;
    *) echo "error: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
stages=(target ar-drafter self-data greedy-data dflash dspark eagle3 card)
started=0
for stage in "${stages[@]}"; do
  [ "$stage" = "$from" ] && started=1
  [ $started = 1 ] || continue
  if [ $fresh = 1 ]; then rm -rf "runs/$stage" "runs/$stage/self"; fi
  echo "$(date +%H:%M:%S) $stage on $device (log: runs/$stage.log)"
  if [ "$stage" = card ]; then
    "$PYTHON" -m engine.train card > "runs/$stage.log" 2>&1
  else
    "$PYTHON" -m engine.train "$stage" --device "$device" > "runs/$stage.log" 2>&1
  fi
done
[ $started = 1 ] || { echo "error: no stage named $from" >&2; exit 2; }
echo "$(date +%H:%M:%S) done"
