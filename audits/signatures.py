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


class Malformed(ValueError):
    """A signature document or manifest that is not what the server writes."""


def _json(content: bytes) -> object:
    try:
        return json.loads(content.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise Malformed("not UTF-8") from error
    except RecursionError as error:
        raise Malformed("nested too deeply") from error
    except ValueError as error:
        raise Malformed(f"not JSON ({error})") from error


def _hashes(value: object, where: str) -> dict[str, str]:
    """``value`` as a map of file names to SHA-256 hex digests, or :class:`Malformed`."""
    if not isinstance(value, dict):
        raise Malformed(f"{where} is not an object of file names")
    for name, digest in value.items():
        if not (isinstance(digest, str) and len(digest) == 64 and _is_hex(digest)):
            raise Malformed(f"{where}: the SHA-256 of {name!r} is not 64 hex digits")
    return value


def _is_hex(text: str) -> bool:
    return all(character in "0123456789abcdef" for character in text)


def _signature_document(content: bytes) -> tuple[dict[str, Any], bytes, bytes]:
    """The signed object, its canonical bytes and the signature, or :class:`Malformed`."""
    document = _json(content)
    if not isinstance(document, dict) or not isinstance(document.get("signed"), dict):
        raise Malformed("no signed object")
    signed, signature = document["signed"], document.get("signature")
    if not isinstance(signature, str):
        raise Malformed("no signature")
    try:
        return signed, _canonical(signed), base64.b64decode(signature, validate=True)
    except RecursionError as error:
        raise Malformed("nested too deeply") from error
    except ValueError as error:
        raise Malformed("the signature is not base64") from error


def _signed_hashes(signed: Mapping[str, Any]) -> dict[str, str]:
    hashes = _hashes(signed.get("files"), "signed files")
    if set(hashes) != set(SIGNED_FILES):
        raise Malformed(f"signs {sorted(hashes)}, not {list(SIGNED_FILES)}")
    return hashes


def listed_files(manifest: bytes) -> dict[str, str]:
    """The files a manifest lists, by name, with their SHA-256; :class:`Malformed` unless it
    is an object whose ``files`` are objects with a unique ``name`` and a ``sha256``."""
    document = _json(manifest)
    entries = document.get("files") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise Malformed("no list of files")
    listed: dict[str, object] = {}
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or "sha256" not in entry:
            raise Malformed("a file without a name or a sha256")
        if name in listed or name in (*SIGNED_FILES, SIGNATURE):
            raise Malformed(f"{name!r} is listed twice")
        listed[name] = entry["sha256"]
    return _hashes(listed, "files")


def verify(files: Mapping[str, bytes], public_key: str) -> list[Check]:
    """Check a report's files against the public key an auditor was given: the signature, the
    manifest's and the PDF's hashes it signs, every file the manifest lists, and that there
    is no other file. Whatever the files hold, the answer is checks, never an exception."""
    key = _public_key(public_key)
    if key is None:
        return [Check("public key", False, "not a base64 Ed25519 public key")]
    if SIGNATURE not in files:
        return [Check(SIGNATURE, False, "missing")]
    try:
        signed, canonical, signature = _signature_document(files[SIGNATURE])
        key.verify(signature, canonical)
        expected = _signed_hashes(signed)
    except Malformed as error:
        return [Check(SIGNATURE, False, f"unreadable: {error}")]
    except InvalidSignature:
        return [Check("signature", False, "not made by the holder of this public key")]
    checks = [Check("signature", True, f"{ALGORITHM}, report {signed.get('report')}")]
    checks += [_file_check(name, files, expected[name]) for name in SIGNED_FILES]
    if not checks[1].ok:
        return checks
    try:
        listed = listed_files(files[MANIFEST])
    except Malformed as error:
        return [*checks, Check(MANIFEST, False, f"unreadable: {error}")]
    checks += [_file_check(name, files, listed[name]) for name in sorted(listed)]
    unexpected = sorted(set(files) - set(listed) - {*SIGNED_FILES, SIGNATURE})
    return checks + [Check(name, False, UNEXPECTED) for name in unexpected]


def signed_manifest(files: Mapping[str, bytes], public_key: str) -> dict[str, Any] | None:
    """The manifest in ``files`` if the signature holds and vouches for it, else None."""
    held = {check.subject for check in verify(files, public_key) if check.ok}
    if not {"signature", MANIFEST} <= held:
        return None
    manifest = json.loads(files[MANIFEST])
    return manifest if isinstance(manifest, dict) else None


UNEXPECTED: Final = "unexpected: not listed in the manifest (verify a folder of one report)"


def _file_check(name: str, files: Mapping[str, bytes], expected: str) -> Check:
    if name not in files:
        return Check(name, False, "missing")
    actual = sha256(files[name])
    detail = actual if actual == expected else f"sha256 {actual}, signed {expected}"
    return Check(name, actual == expected, detail)
