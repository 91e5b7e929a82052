"""CSV cells a spreadsheet would run as formulas are neutralised, in every CSV the product
writes (they all go through ``latencyboard.spreadsheet``)."""

from __future__ import annotations

import csv
import io
import re

import pytest

from latencyboard.spreadsheet import csv_bytes, safe_cell
from tests.support import ROOT


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("-cmd", "'-cmd"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("fraud-scorer", "fraud-scorer"),
        ("", ""),
        (None, ""),
        (-12, "-12"),
        ("-12", "-12"),
        ("-0.25", "-0.25"),
        ("-1e-3", "-1e-3"),
        ("+12", "'+12"),
    ],
    ids=repr,
)
def test_a_cell_a_spreadsheet_would_evaluate_is_prefixed_with_a_quote(value, cell):
    assert safe_cell(value) == cell


def test_csv_bytes_neutralise_every_cell_and_read_back():
    # when a row of a formula, a name and a negative number is written
    content = csv_bytes(["name", "value"], [["=1+1", -3], ["plain, with comma", "@x"]])

    # then a CSV reader sees the quoted formula as text and the number as it was
    assert list(csv.reader(io.StringIO(content.decode()))) == [
        ["name", "value"],
        ["'=1+1", "-3"],
        ["plain, with comma", "'@x"],
    ]


def test_no_csv_is_written_outside_the_one_helper():
    # every module that writes CSV goes through csv_bytes, so none can forget the rule
    writers = re.compile(r"csv\.(writer|DictWriter)\(")
    found = [
        path.relative_to(ROOT).as_posix()
        for package in ("latencyboard", "ingest", "audits")
        for path in sorted((ROOT / package).rglob("*.py"))
        if writers.search(path.read_text())
    ]
    assert found == ["latencyboard/spreadsheet.py"]
