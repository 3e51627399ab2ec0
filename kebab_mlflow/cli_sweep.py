"""CLI commands: sweep (registered on kebab_mlflow.cli.app)."""
