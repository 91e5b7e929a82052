"""The frame of PostgreSQL's binary COPY format (pure: no Django).

PostgreSQL docs, "COPY" → "Binary Format": a signature and a header, then per row a 16-bit
field count followed by each field as a 32-bit length (-1 for NULL) and its bytes in the
type's binary send format, then a 16-bit -1 trailer.
"""

from __future__ import annotations

from typing import Final

SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00"
HEADER: Final = SIGNATURE + bytes(8)  # signature, flags, header extension length
TRAILER: Final = b"\xff\xff"
