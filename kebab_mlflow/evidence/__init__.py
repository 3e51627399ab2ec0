"""Evidence spans: golden-set truth anchored to the source text, not to one chunking.

- :mod:`kebab_mlflow.evidence.spec`: the ``evidence:`` entries of a query, parsed and checked
  for shape (the golden-set reader, :mod:`kebab_mlflow.golden`, calls it);
- :mod:`kebab_mlflow.evidence.locate`: each entry as character offsets into the parsed
  document text, checked against the corpus (a quote not found is a problem with file:line);
- :mod:`kebab_mlflow.evidence.resolve`: the versioned rule that makes chunks relevant
  (``evidence-v1``), its per-query audit, and the character-level metrics.

The package imports nothing above :mod:`kebab_mlflow.errors`: chunks reach it as plain
``(chunk id, doc id, spans)`` records, so the pipeline and the golden reader both stay free to
import it.
"""
