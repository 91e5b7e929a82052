"""The demo, gathered here: inference pipelines with realistic traffic profiles, the OTLP
traffic generator of ``make run`` and the back-fill of days of its history (``manage.py
backfill_demo`` and ``demo_history``). It is a client of the receiver: ``ingest/`` knows
nothing of it."""
