"""A secret shown once after the form that created it, by Post/Redirect/Get.

The POST that creates a token keeps its plaintext in the server-side session and redirects;
the GET that follows takes it out and shows it. Reloading that page then shows the token's
list, never a second token (the browser repeats the GET, not the POST), and the plaintext
never sits in a cookie: Django's default message storage is one, signed but not encrypted.
"""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpRequest

_KEY: Final = "issued_once"


def keep_once(request: HttpRequest, what: str, issued: dict[str, Any]) -> None:
    """Keep ``issued`` (JSON values) for the next :func:`take_once` of ``what``."""
    request.session[f"{_KEY}:{what}"] = issued


def take_once(request: HttpRequest, what: str) -> dict[str, Any] | None:
    """What :func:`keep_once` kept for ``what``, removed from the session; None after that."""
    found: dict[str, Any] | None = request.session.pop(f"{_KEY}:{what}", None)
    return found
