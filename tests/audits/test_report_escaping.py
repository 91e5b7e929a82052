"""Names people or spans chose (team, pipeline, objective) reach the report's PDF and CSV as
text: never ReportLab markup, never a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path

import pytest
from reportlab.pdfgen import canvas

from audits.reporting import tables
from tests.audits.sample import render_pdf, report_data

ONERROR = "<img src=x onerror=alert(1)>"


def _text(content: bytes, tmp_path: Path) -> str:
    """The PDF's text without spaces and hyphens (pdftotext joins a word wrapped at a hyphen)."""
    path = tmp_path / "report.pdf"
    path.write_bytes(content)
    text = subprocess.run(
        ["pdftotext", str(path), "-"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return _squeezed(text)


def _squeezed(text: str) -> str:
    return "".join(text.split()).replace("-", "")


@pytest.mark.parametrize("where", ["pipeline", "team"])
def test_an_image_tag_in_a_name_is_printed_as_text_and_embeds_no_file(tmp_path, where):
    # given a PNG on the worker's disk, and a name that is an image tag pointing at it
    image = tmp_path / "secret.png"
    subprocess.run(
        ["pdftoppm", "-png", "-r", "10", "-singlefile", "-", str(image.with_suffix(""))],
        input=_minimal_pdf(),
        check=True,
        timeout=60,
    )
    embed = f'<img src="{image}" width="40" height="40"/>'
    data = report_data(**{where: embed})

    # when the PDF is rendered
    content = render_pdf(data)

    # then the name reads as typed, and the PDF holds no image
    assert _squeezed(embed) in _text(content, tmp_path)
    assert b"/Subtype /Image" not in content


def test_a_broken_tag_in_a_pipeline_name_still_renders(tmp_path):
    # given a pipeline named as an image tag with an attribute ReportLab refuses
    data = report_data(pipeline=ONERROR)

    # when the PDF is rendered
    content = render_pdf(data)

    # then it renders, and the name reads as typed
    assert _squeezed(ONERROR) in _text(content, tmp_path)


def test_formula_names_are_quoted_in_the_report_csv():
    # given an objective and a pipeline named as spreadsheet formulas
    data = report_data(pipeline="@SUM(1+1)", objective='=HYPERLINK("http://x","y")')

    # when the tables are written
    files = tables.csv_files(data)

    # then a spreadsheet reads them as text, and the numbers stay numbers
    rows = list(csv.DictReader(io.StringIO(files["attainment.csv"].decode())))
    assert {(r["objective"], r["pipeline"]) for r in rows} == {
        ('\'=HYPERLINK("http://x","y")', "'@SUM(1+1)")
    }
    assert {r["good"] for r in rows} == {"995"}
    percentiles = list(csv.DictReader(io.StringIO(files["percentiles.csv"].decode())))
    assert {r["pipeline"] for r in percentiles} == {"'@SUM(1+1)"}


def _minimal_pdf() -> bytes:
    """A one-page PDF, for pdftoppm to turn into a real PNG."""
    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=(20, 20))
    page.drawString(2, 2, "x")
    page.save()
    return out.getvalue()
