"""Turn public collections into golden sets and corpora: BEIR (:mod:`.beir`), SQuAD-style QA
(:mod:`.squad`)."""
