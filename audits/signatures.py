"""Signing a report with the server's Ed25519 key, and checking it with the public key alone
(pure: ``cryptography`` and the standard library, no Django).

``manifest.json`` lists every table with its SHA-256; ``report.pdf`` prints the manifest's
SHA-256 on every page; ``signature.json`` signs the SHA-256 of both. So the signature covers
every file, and a printed page names the manifest it belongs to.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM: Final = "Ed25519"
MANIFEST: Final = "manifest.json"
PDF: Final = "report.pdf"
SIGNATURE: Final = "signature.json"
SIGNED_FILES: Final = (MANIFEST, PDF)


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def new_private_key() -> bytes:
    """A fresh Ed25519 private key, as its 32 raw bytes."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


def public_key_of(private_key: bytes) -> str:
    """The public key of ``private_key``, base64 of its 32 raw bytes (what auditors are given)."""
    raw = (
        Ed25519PrivateKey.from_private_bytes(private_key)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    return base64.b64encode(raw).decode()


def _canonical(signed: Mapping[str, Any]) -> bytes:
    return json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(private_key: bytes, report_id: int, files: Mapping[str, bytes]) -> bytes:
    """``signature.json`` over the SHA-256 of the manifest and the PDF in ``files``."""
    signed = {"report": report_id, "files": {name: sha256(files[name]) for name in SIGNED_FILES}}
    signature = Ed25519PrivateKey.from_private_bytes(private_key).sign(_canonical(signed))
    document = {
        "algorithm": ALGORITHM,
        "public_key": public_key_of(private_key),
        "signed": signed,
        "signature": base64.b64encode(signature).decode(),
        "how_to_verify": "python -m audits.verify <folder of the report's files> "
        "--public-key <the server's public key>",
    }
    return (json.dumps(document, sort_keys=True, indent=2) + "\n").encode()


@dataclass(frozen=True, slots=True)
class Check:
    """One thing verified: ``subject`` (a file name or ``signature``), whether it holds, why."""

    subject: str
    ok: bool
    detail: str


def _public_key(text: str) -> Ed25519PublicKey | None:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text.strip(), validate=True))
    except ValueError:
        return None


def verify(files: Mapping[str, bytes], public_key: str) -> list[Check]:
    """Check a report's files against the public key an auditor was given: the signature, the
    manifest's and the PDF's hashes it signs, and every file the manifest lists."""
    key = _public_key(public_key)
    if key is None:
        return [Check("public key", False, "not a base64 Ed25519 public key")]
    try:
        document = json.loads(files[SIGNATURE])
        signed, signature = document["signed"], base64.b64decode(document["signature"])
    except (KeyError, ValueError, TypeError) as error:
        return [Check(SIGNATURE, False, f"missing or unreadable ({type(error).__name__})")]
    try:
        key.verify(signature, _canonical(signed))
    except InvalidSignature:
        return [Check("signature", False, "not made by the holder of this public key")]
    checks = [Check("signature", True, f"{ALGORITHM}, report {signed.get('report')}")]
    listed = dict(signed.get("files", {}))
    try:
        manifest = json.loads(files[MANIFEST])
        listed |= {f["name"]: f["sha256"] for f in manifest["files"]}
    except (KeyError, ValueError, TypeError) as error:
        return [*checks, Check(MANIFEST, False, f"missing or unreadable ({type(error).__name__})")]
    for name, expected in sorted(listed.items()):
        if name not in files:
            checks.append(Check(name, False, "missing"))
            continue
        actual = sha256(files[name])
        detail = actual if actual == expected else f"sha256 {actual}, signed {expected}"
        checks.append(Check(name, actual == expected, detail))
    return checks
