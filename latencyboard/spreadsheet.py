"""Every CSV the product writes, with cells a spreadsheet would run as formulas neutralised
(pure: no Django).

OWASP's rule for CSV injection: a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return is prefixed with a single quote, so Excel, LibreOffice and Google Sheets show
it as text instead of evaluating it. A plain number (``-12``, ``-0.5``, ``-1e-3``) is left
as it is: a spreadsheet parses it as a number literal, which can call nothing and reference
nothing, and a report's negative figures must stay numeric for whoever sums them.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Final

FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")
_NUMBER: Final = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: object) -> str:
    """``value`` as CSV cell text that no spreadsheet evaluates."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_bytes(header: Sequence[str], rows: Iterable[Sequence[object]]) -> bytes:
    """UTF-8 CSV (``\\n`` line ends, minimal quoting) of ``header`` and ``rows``, every cell
    through :func:`safe_cell`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([safe_cell(cell) for cell in header])
    writer.writerows([safe_cell(cell) for cell in row] for row in rows)
    return out.getvalue().encode()
