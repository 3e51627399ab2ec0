"""The tracking layer: the only code that talks to MLflow. :mod:`.store` alone imports mlflow and
returns the project's own :class:`~kebab_mlflow.records.RunRecord`; :mod:`.log` records
evaluations as runs; :mod:`.references` resolves run references."""
