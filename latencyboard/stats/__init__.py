"""Pure statistics of the detectors and compare (numpy and the standard library only): exact
binomial tails, quantile rank bounds, Holm's procedure and rank tests on sketch buckets."""
