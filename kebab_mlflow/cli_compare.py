"""CLI commands: compare (registered on kebab_mlflow.cli.app)."""
