"""Pure statistics of the detectors and compare (numpy, the standard library and the sketch):
exact binomial tails, quantile rank bounds and a sketch's quantile intervals, Holm's procedure
and rank tests on sketch buckets."""
