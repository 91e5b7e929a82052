"""Token format and hashing (pure), for ingest tokens and personal API tokens alike.

Tokens are 256-bit random strings, so a single SHA-256 is enough to store them: there is no
dictionary to guess from, and a fast hash keeps the lookup on the ingest hot path cheap.
"""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "lb_"
DISPLAY_LENGTH = len(PREFIX) + 6


def generate(prefix: str = PREFIX) -> str:
    """A new plaintext token, shown to its creator once."""
    return prefix + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """The hex SHA-256 under which a token is stored and looked up."""
    return hashlib.sha256(token.encode()).hexdigest()


def display_prefix(token: str, length: int = DISPLAY_LENGTH) -> str:
    """The leading characters kept in clear so people can tell their tokens apart."""
    return token[:length]
