"""Running a golden set through a pipeline, in memory (no MLflow): the query loop, per_query.jsonl,
the report, plots and the calibration fit. :func:`.evaluate.evaluate` is the entry point.
"""
