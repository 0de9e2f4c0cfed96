#!/usr/bin/env bash
# Install what is needed and start SpecLab on the embedded models: bash scripts/run.sh [--port N]
# setup.sh shows its steps and ends with a ready line; the app then prints the address it serves at.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "run: starting SpecLab (loading the models); it prints the address it serves at once it is up"
exec .venv/bin/python -m app "$@"
