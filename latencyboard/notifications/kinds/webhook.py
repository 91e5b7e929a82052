"""A generic webhook, signed as the Standard Webhooks specification says.

The target is the receiver's URL, the secret a ``whsec_<base64>`` signing key (generated
and shown once when a new channel is saved without one). The body is
``{"type", "timestamp", "data"}`` with the notice's fields in ``data``. The signature is
``v1,`` + base64 HMAC-SHA256 of ``"{webhook-id}.{webhook-timestamp}.{body}"``, keyed with
the bytes of the ``whsec_<base64>`` secret. ``webhook-id`` is derived from the notice, so a
retry of one notice carries the same id and a receiver can drop duplicates;
``webhook-timestamp`` is the attempt's own time, as the specification asks.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import secrets

import orjson

from latencyboard.notifications.kind import BadSecretError, HttpKind
from latencyboard.notifications.message import HttpMessage, is_test, marked_title, rfc3339
from latencyboard.notifications.notice import Notice
from latencyboard.notifications.targets import mask

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)


def new_secret() -> str:
    """A fresh signing secret in the specification's format (24 random bytes)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key behind a ``whsec_<base64>`` secret; raises :class:`BadSecretError`."""
    if not secret.startswith(SECRET_PREFIX):
        raise BadSecretError("the signing secret must look like whsec_<base64>")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error as exc:
        raise BadSecretError("the signing secret after whsec_ is not valid base64") from exc
    if not key:
        raise BadSecretError("the signing secret is empty")
    return key


def message_id(notice: Notice) -> str:
    digest = hashlib.sha256(
        f"{notice.dedup_key}\n{notice.action}\n{notice.at.isoformat()}".encode()
    ).hexdigest()
    return f"msg_{digest[:32]}"


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.digest(key, signed, "sha256")).decode()


def document(notice: Notice) -> dict[str, object]:
    return {
        "type": f"alert.{notice.action}",
        "timestamp": rfc3339(notice.at),
        "data": {
            "dedup_key": notice.dedup_key,
            "action": str(notice.action),
            "severity": str(notice.severity),
            "team": notice.team,
            "pipeline": notice.pipeline,
            "stage": notice.stage,
            "title": marked_title(notice),
            "summary": notice.summary,
            "url": notice.url,
            "at": rfc3339(notice.at),
            "started_at": rfc3339(notice.started_at) if notice.started_at else None,
            "figures": dict(notice.figures),
            "numbers": dict(notice.numbers),
            "links": dict(notice.links),
            "actor": notice.actor,
            "test": is_test(notice),
        },
    }


def render(notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
    """The signed request for one attempt at ``now``; raises :class:`BadSecretError`."""
    key = secret_key(secret)
    body = orjson.dumps(document(notice))
    msg_id = message_id(notice)
    timestamp = int(now.timestamp())
    headers = {
        "Content-Type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(key, msg_id, timestamp, body),
    }
    return HttpMessage(headers=headers, body=body)


class Webhook(HttpKind):
    name = "webhook"
    label = "Webhook (signed)"
    asks_for = "signing key whsec_… (left empty on a new channel: generated, shown once)"
    issued_note = (
        "Every notification to this channel is signed with it as the Standard Webhooks"
        " specification says (headers webhook-id, webhook-timestamp, webhook-signature)."
    )

    def secret_problem(self, secret: str) -> str | None:
        try:
            secret_key(secret)
        except BadSecretError as exc:
            return str(exc)
        return None

    def new_secret(self) -> str:
        return new_secret()

    def secret_hint(self, secret: str) -> str:
        return mask(secret, SECRET_PREFIX)

    def render(self, notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
        return render(notice, secret, now)


KIND = Webhook()
