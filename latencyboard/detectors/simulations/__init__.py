"""The regression detector over simulated traffic, as ``make bench-detector`` and the tests
run it: ``steady`` (1 request/s), ``diurnal`` (a daily cycle of 0.2 to 3 requests/s) and
``rollouts`` (a new version taking over one stage on the diurnal traffic)."""
