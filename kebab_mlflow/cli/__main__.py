"""``python -m kebab_mlflow.cli``."""

from kebab_mlflow.cli import main

main()
