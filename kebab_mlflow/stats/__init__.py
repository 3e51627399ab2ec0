"""Statistics: paired resampling tests (bootstrap CIs, sign-flip randomization, Holm) and the
distinguishing-power gauge."""
