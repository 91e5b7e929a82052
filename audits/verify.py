"""Verify a downloaded report offline: ``python -m audits.verify <folder> --public-key KEY``.

Needs the report's files (as downloaded: ``report-12-2026q3-attainment.csv`` or plain
``attainment.csv``) and the server's public key (shown on the reports page and in the
manifest, best obtained from the server's operator, not from the files), nothing else: no
database, no Django, no network. Exit status 0 when every check holds, 1 otherwise.

The folder holds one report and nothing else: two files that are one manifest name (a
download and a plain copy) and files the manifest does not list each fail the check, as an
auditor cannot tell which of two tables the report vouches for.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audits.signatures import Check, verify

_DOWNLOADED = re.compile(r"report-\d+-\d{4}q[1-4]-(?P<name>.+)")


@dataclass(frozen=True, slots=True)
class Folder:
    """A folder's files by their manifest names, and the names more than one file claims."""

    files: dict[str, bytes]
    claimed: dict[str, list[str]]

    def checks(self, of_files: list[Check]) -> list[Check]:
        """``of_files``, but a name two files claim fails, naming both, whatever they hold."""
        twice = {name: paths for name, paths in self.claimed.items() if len(paths) > 1}
        kept = [check for check in of_files if check.subject not in twice]
        return kept + [
            Check(name, False, "two files for one name: " + ", ".join(paths))
            for name, paths in sorted(twice.items())
        ]


def read_folder(folder: Path) -> Folder:
    """The report's files in ``folder`` by their names in the manifest."""
    files: dict[str, bytes] = {}
    claimed: dict[str, list[str]] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file():
            match = _DOWNLOADED.fullmatch(path.name)
            name = match["name"] if match else path.name
            files[name] = path.read_bytes()
            claimed.setdefault(name, []).append(path.name)
    return Folder(files, claimed)


def _public_key(given: str) -> str:
    """The key itself, or the content of the file it names."""
    try:
        return Path(given).read_text() if Path(given).is_file() else given
    except (OSError, ValueError):
        return given


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audits.verify", description=__doc__)
    parser.add_argument("folder", type=Path, help="the folder of the report's files")
    parser.add_argument(
        "--public-key",
        required=True,
        help="the server's Ed25519 public key (base64), or a file that holds it",
    )
    options = parser.parse_args(argv)
    # File names and manifest text may hold anything; the report must still be printed.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        folder = read_folder(options.folder)
    except OSError as error:
        checks = [Check(str(options.folder), False, f"unreadable folder: {error.strerror}")]
    else:
        checks = folder.checks(verify(folder.files, _public_key(options.public_key)))
    for check in checks:
        print(f"{'ok' if check.ok else 'FAILED':8}{check.subject}  {check.detail}")
    verified = bool(checks) and all(check.ok for check in checks)
    print("verified" if verified else "NOT VERIFIED")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
