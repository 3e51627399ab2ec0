"""CLI commands: answers (registered on kebab_mlflow.cli.app)."""
