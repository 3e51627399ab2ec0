"""The use cases, above the tracking layer: ``run`` / ``log_run`` / ``upload`` (app/run.py),
``sweep`` (app/sweep.py), ``tune`` (app/tune.py) and compare's recording (app/compare.py), each
through the one run lifecycle (app/lifecycle.py). Tracking below only reads and writes MLflow;
sweep/ holds what a sweep is (its file, grid, executors, gauge), comparison/ the verdict."""
