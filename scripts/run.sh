#!/usr/bin/env bash
# Install what is needed and start SpecLab on the embedded models: bash scripts/run.sh [--port N]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m app "$@"
