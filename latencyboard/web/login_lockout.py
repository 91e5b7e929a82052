"""Login lockouts beyond django-axes' own per user name and address: an address's failures are
also counted across user names (``LOGIN_ADDRESS_FAILURE_LIMIT``), and every lockout says when
it ends, in ``Retry-After`` and on the page."""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Max, QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

logger = logging.getLogger(__name__)


def _attempts_from(address: str, now: dt.datetime) -> QuerySet[AccessAttempt]:
    """The address's failure records still inside the cool-off (each further failure of a
    record restarts it, as axes counts them)."""
    return AccessAttempt.objects.filter(
        ip_address=address, attempt_time__gte=now - settings.AXES_COOLOFF_TIME
    )


def _address_locked(address: str, now: dt.datetime) -> bool:
    failures = _attempts_from(address, now).aggregate(n=Sum("failures_since_start"))["n"] or 0
    return failures >= settings.LOGIN_ADDRESS_FAILURE_LIMIT


class AddressLockoutHandler(AxesDatabaseHandler):
    """Axes' database handler, locking out an address that reached
    ``LOGIN_ADDRESS_FAILURE_LIMIT`` failures whatever the user names."""

    def is_locked(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> bool:
        return super().is_locked(request, credentials) or _address_locked(
            request.axes_ip_address,  # type: ignore[attr-defined]
            timezone.now(),
        )

    def user_login_failed(
        self,
        sender: Any,
        credentials: dict[str, Any],
        request: HttpRequest | None = None,
        **kwargs: Any,
    ) -> None:
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or getattr(request, "axes_locked_out", False):
            return
        address = request.axes_ip_address  # type: ignore[attr-defined]
        if _address_locked(address, timezone.now()):
            request.axes_locked_out = True  # type: ignore[attr-defined]
            request.axes_credentials = credentials  # type: ignore[attr-defined]
            logger.warning("login.address_locked_out", extra={"ip": address})


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """The lockout page (429), saying whether the address or one user name from it is locked
    out and until when; ``Retry-After`` is the same moment in seconds."""
    now = timezone.now()
    address = request.axes_ip_address  # type: ignore[attr-defined]
    username = get_client_username(request, credentials) or ""
    by_address = _address_locked(address, now)
    attempts = _attempts_from(address, now)
    if not by_address:
        attempts = attempts.filter(username=username)
    last = attempts.aggregate(last=Max("attempt_time"))["last"] or now
    until = last + settings.AXES_COOLOFF_TIME
    limit = (
        settings.LOGIN_ADDRESS_FAILURE_LIMIT
        if by_address
        else get_failure_limit(request, credentials)
    )
    context = {
        "failure_limit": limit,
        "username": "" if by_address else username,
        "by_address": by_address,
        "until": until,
        "cooloff_minutes": round(settings.AXES_COOLOFF_TIME.total_seconds() / 60),
    }
    response = render(request, settings.AXES_LOCKOUT_TEMPLATE, context, status=429)
    response["Retry-After"] = str(max(1, math.ceil((until - now).total_seconds())))
    return response
