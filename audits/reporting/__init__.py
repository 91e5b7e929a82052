"""Building a quarterly audit report: ``figures`` reads the data, ``tables`` and ``pdf`` turn
it into files (pure), ``manifest`` lists them with their hashes."""
