"""Compare: per-stage latency quantiles of one pipeline, side A against side B, with
distribution-free confidence intervals and a verdict per stage (the statistics are
:mod:`latencyboard.stats.comparison`)."""
