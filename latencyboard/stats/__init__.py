"""Pure statistics of the detectors and compare (numpy, the standard library and the sketch):
exact binomial tails, quantile rank bounds and a sketch's quantile intervals, Holm's procedure
and rank tests on sketch buckets, the interval of a quantile's change, and ``comparison``:
two sketches compared quantile by quantile with the verdicts compare shows."""
