"""The reference pipeline: corpus, chunker, text analysis, retrieval backends, the extractive
answerer and its calibrator, and the index cache. It knows nothing of metrics or tracking."""
