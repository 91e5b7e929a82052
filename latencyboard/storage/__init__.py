"""The storage layer: the one place that knows how latencyboard's data sits in PostgreSQL.

Table names (:mod:`.tables`), binary row layouts and COPY encoders, the binary timestamp
epoch (:mod:`.timestamps`), advisory lock keys (:mod:`.locks`) and every raw SQL statement
live in this package and nowhere else. The rest of the code reads and writes through the
functions here or through the Django ORM, so a change of table, column or format is made in
one place. A test greps the other modules for table names to keep it that way.
"""
