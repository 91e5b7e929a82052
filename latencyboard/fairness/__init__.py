"""Tenant fairness: what one team may hold of what every team shares, and what it is told
when it may not.

One vocabulary for every bound here:

* **capacity**: what a process has and every team draws on (bytes in flight, handler threads,
  connections, delivery workers);
* a team's **share**: how much of a capacity one team may hold while another team is waiting
  for it; a team alone may use all of it (work-conserving) unless a bound says otherwise;
* a **slot**: one unit of a capacity held for a request's (or a delivery's) whole length;
* a **rest**: time a team's slot stays held after its work, so its work takes at most its share
  of the time;
* a **refusal**: ``429`` / ``RESOURCE_EXHAUSTED`` when the team is past its own bound (its own
  doing, to retry later), ``503`` / ``UNAVAILABLE`` when the capacity is full for everyone;
  both carry ``Retry-After`` (and gRPC's ``RetryInfo``).

The bounds, each named for what it protects:

* :mod:`.ingest_capacity`: an ingest process's memory (request bytes in flight) and its gRPC
  handler threads (``INGEST_MAX_INFLIGHT_BYTES``, ``INGEST_THREADS``,
  ``INGEST_TEAM_SHARE_PERCENT``, ``INGEST_ROOM_WAIT_SECONDS``);
* :mod:`.requests_in_flight`: a web process's threads and pooled connections
  (``WEB_TEAM_MAX_REQUESTS``);
* :mod:`.heavy_reads`: the web processes' CPU, all of them together: a team's heavy reads hold
  one of its slots each (``WEB_TEAM_MAX_HEAVY_REQUESTS``, ``WEB_HEAVY_WAIT_SECONDS``);
* :mod:`.heavy_read_time`: a web process's time, per team: a rest after each read past the
  team's share (``WEB_TEAM_HEAVY_SHARE_PERCENT``);
* :mod:`.delivery_slots`: the notifier's delivery workers, so that one team's slow receivers
  hold only its own slots (``NOTIFICATION_SLOTS``).

The web's refusals tell the client to come back after ``WEB_RETRY_AFTER_SECONDS``; ingest's
after ``INGEST_RETRY_AFTER_SECONDS``. The rules that decide (:mod:`.ingest_capacity`,
:mod:`.heavy_read_time`, :mod:`.delivery_slots`) are pure; the modules that hold slots use
Django's database connection and settings.
"""
