"""Verify a downloaded report offline: ``python -m audits.verify <folder> --public-key KEY``.

Needs the report's files (as downloaded: ``report-12-2026q3-attainment.csv`` or plain
``attainment.csv``) and the server's public key (shown on the reports page and in the
manifest, best obtained from the server's operator, not from the files), nothing else: no
database, no Django, no network. Exit status 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from audits.signatures import verify

_DOWNLOADED = re.compile(r"report-\d+-\d{4}q[1-4]-(?P<name>.+)")


def read_folder(folder: Path) -> dict[str, bytes]:
    """The report's files in ``folder`` by their names in the manifest."""
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file():
            match = _DOWNLOADED.fullmatch(path.name)
            files[match["name"] if match else path.name] = path.read_bytes()
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audits.verify", description=__doc__)
    parser.add_argument("folder", type=Path, help="the folder of the report's files")
    parser.add_argument(
        "--public-key",
        required=True,
        help="the server's Ed25519 public key (base64), or a file that holds it",
    )
    options = parser.parse_args(argv)
    key = options.public_key
    if Path(key).is_file():
        key = Path(key).read_text()
    checks = verify(read_folder(options.folder), key)
    for check in checks:
        print(f"{'ok' if check.ok else 'FAILED':8}{check.subject}  {check.detail}")
    verified = bool(checks) and all(check.ok for check in checks)
    print("verified" if verified else "NOT VERIFIED")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
