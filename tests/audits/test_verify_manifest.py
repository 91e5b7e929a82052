"""The offline verifier's reading of a manifest and a signature: whatever bytes they hold,
signed or not, it answers with checks, never an exception (pure: no database)."""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from audits import signatures
from audits.signatures import MANIFEST, PDF, SIGNATURE

PRIVATE_KEY = signatures.new_private_key()
PUBLIC_KEY = signatures.public_key_of(PRIVATE_KEY)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
manifests = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.lists(
        st.dictionaries(st.sampled_from(["name", "sha256", "bytes"]), json_values), max_size=3
    ).map(lambda files: json.dumps({"files": files}).encode()),
)


def _signed_folder(manifest: bytes) -> dict[str, bytes]:
    files = {MANIFEST: manifest, PDF: b"%PDF-1.7\n"}
    return {**files, SIGNATURE: signatures.sign(PRIVATE_KEY, 1, files)}


@given(manifests)
def test_any_signed_manifest_gets_checks_never_an_exception(manifest: bytes) -> None:
    checks = signatures.verify(_signed_folder(manifest), PUBLIC_KEY)

    assert checks
    assert all(isinstance(check, signatures.Check) for check in checks)


@given(json_values)
def test_any_signed_document_gets_checks_never_an_exception(signed: object) -> None:
    # given a signature document whose signed part is any JSON, truly signed with the key
    files = _signed_folder(b'{"files": []}')
    document = json.loads(files[SIGNATURE])
    canonical = json.dumps(signed, sort_keys=True, separators=(",", ":")).encode()
    document["signed"] = signed
    signature = Ed25519PrivateKey.from_private_bytes(PRIVATE_KEY).sign(canonical)
    document["signature"] = base64.b64encode(signature).decode()
    files[SIGNATURE] = json.dumps(document).encode()

    checks = signatures.verify(files, PUBLIC_KEY)

    assert checks
    assert all(isinstance(check, signatures.Check) for check in checks)


@given(st.binary(max_size=200))
def test_any_signature_file_gets_checks_never_an_exception(signature: bytes) -> None:
    files = {**_signed_folder(b'{"files": []}'), SIGNATURE: signature}

    checks = signatures.verify(files, PUBLIC_KEY)

    assert [check.ok for check in checks] == [False]
