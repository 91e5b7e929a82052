"""The detectors: pure computation (numpy, the standard library, the sketch and
:mod:`latencyboard.stats`; no Django), plain values and sketches in, frozen dataclasses out.

``regression`` tests each stage's tail (``tail``: counts above a baseline quantile's bucket)
and its median against its baseline, ``seasonal`` picks that baseline's hours, ``mix`` tells a
regression from a change of traffic mix, ``burn_rate`` evaluates SLO burn-rate alerts from
exact counters, ``lifecycle`` moves an alert between firing and resolved, ``evidence`` turns
their conclusions into an alert's figures and words, ``reach`` works out what a rule can find
at a stage's traffic and ``replay`` replays a rule minute by minute over stored sketches.
``simulations`` is the statistical acceptance harness that runs the real detector over
simulated traffic. The rules, their evaluation against stored rollups and the alerts they
raise are in :mod:`latencyboard.alerts`.
"""
