"""Golden sets that evolve: what changed between two versions (:mod:`.diff`), the judging
queue of unjudged hits (:mod:`.queue`) and merging its grades back (:mod:`.merge`).

Rescoring a stored run under another version is :mod:`kebab_mlflow.evaluation.rescore`
(in memory) and :mod:`kebab_mlflow.app.rescore` (from and to the tracking store).
"""
