"""The tracking layer: the only code that talks to MLflow. :mod:`.store` alone imports mlflow and
returns the project's own :class:`~kebab_mlflow.records.RunRecord`; :mod:`.log` records
evaluations as runs; :mod:`.references` resolves run references."""

import os

# MLflow's environment defaults, set here because this package is imported before .store
# imports mlflow, and `import mlflow` starts MLflow's telemetry client at once. Each is a
# default only: a value the user set wins.
#
# Telemetry off: its thread deletes ``_MLFLOW_TELEMETRY_SESSION_ID`` from os.environ while
# ``requests`` iterates os.environ inside ``log_batch`` (KeyError: a random FAILED run against a
# tracking server; issue 18). The switch is mlflow/environment_variables.py
# ``MLFLOW_DISABLE_TELEMETRY``, read by mlflow/telemetry/utils.py ``is_telemetry_disabled``.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
