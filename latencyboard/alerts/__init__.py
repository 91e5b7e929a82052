"""Alert detectors: pure computation (numpy and stdlib only, no Django).

``regression`` tests each stage's tail against its baseline, ``mix`` tells a regression from a
change of traffic mix, ``burn_rate`` evaluates SLO burn-rate alerts from exact counters and
``lifecycle`` moves an alert between firing and resolved. ``simulation`` is the statistical
acceptance harness that runs the real detector over simulated traffic.
"""
