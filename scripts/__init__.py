"""Command-line tools beside the app: training, recordings, timing, load and device checks (run from the project's
root, e.g. `python scripts/app_load.py --help` once `scripts/setup.sh` has installed the project, or
`python -m scripts.gpu_check` on a machine where it is not installed)."""
