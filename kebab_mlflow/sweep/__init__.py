"""Ablation sweeps (DESIGN §8): the sweep file (:mod:`.spec`), running its rows
(:mod:`.execution`, :mod:`.workers`) and the gauge and leaderboard (:mod:`.outputs`)."""
