"""Compare: per-stage latency quantiles of one pipeline, side A against side B, with
bootstrap confidence intervals and a verdict per stage."""
