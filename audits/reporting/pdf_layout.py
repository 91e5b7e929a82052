"""The building blocks of the report's PDF (pure: reportlab only): text that wraps instead of
being cut, tables sized to their content, bar charts whose labels have room, and pages that
each carry the report's id, its manifest's hash, its page number and, while the quarter runs,
the word PROVISIONAL.

Every string goes in as text: a Paragraph parses markup (``<img src=…>`` would embed a file
of the worker's disk, a broken tag would fail the build), and names are what people typed or
spans said.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from reportlab.graphics.charts.barcharts import VerticalBarChart
from reportlab.graphics.shapes import Drawing
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Flowable, Paragraph, Table, TableStyle

PALETTE = (
    colors.HexColor("#1f77b4"),
    colors.HexColor("#ff7f0e"),
    colors.HexColor("#2ca02c"),
    colors.HexColor("#d62728"),
    colors.HexColor("#9467bd"),
    colors.HexColor("#8c564b"),
    colors.HexColor("#e377c2"),
    colors.HexColor("#7f7f7f"),
)
MARGIN = 2 * cm
WIDTH = A4[0] - 2 * MARGIN
STYLES = getSampleStyleSheet()
for _heading in ("Heading2", "Heading3", "Heading4"):
    STYLES[_heading].keepWithNext = 1  # a heading never ends a page alone
_FONT_SIZE = 6.5
_CELL = ParagraphStyle("cell", fontName="Helvetica", fontSize=_FONT_SIZE, leading=8)
_HEAD = ParagraphStyle("head", parent=_CELL, fontName="Helvetica-Bold")
_PADDING = 3
_COLUMN_MAX = 150.0
_SHORT_WORD = 60.0  # a number, a time, a short word: never broken across lines
_TABLE_STYLE = TableStyle(
    [
        ("LEFTPADDING", (0, 0), (-1, -1), _PADDING),
        ("RIGHTPADDING", (0, 0), (-1, -1), _PADDING),
        ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#eeeeee")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ]
)


def paragraph(text: str, style: str = "BodyText") -> Paragraph:
    """``text`` as it reads, wrapped to the width it is given."""
    return Paragraph(escape(text), STYLES[style])


def _widest_word(text: str, font: str) -> float:
    return max((stringWidth(word, font, _FONT_SIZE) for word in text.split()), default=0.0)


def _column_widths(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[float]:
    """As wide as the content (up to a cap); when the page is too narrow, the columns of long
    text wrap between words first, and no column gets narrower than its widest word. When even
    that does not fit, only the long words (identifiers) break across lines: numbers, times
    and short words never do."""
    pad = 2 * _PADDING + 1
    natural, least = [], []
    for i, name in enumerate(header):
        cells = [row[i] for row in body]
        words = max(
            [_widest_word(name, "Helvetica-Bold")] + [_widest_word(c, "Helvetica") for c in cells]
        )
        longest = max(stringWidth(c, "Helvetica", _FONT_SIZE) for c in cells)
        least.append(words + pad)
        natural.append(max(words, min(longest, _COLUMN_MAX)) + pad)
    excess = sum(natural) - WIDTH
    slack = sum(n - m for n, m in zip(natural, least, strict=True))
    if excess <= 0:
        return natural
    if excess <= slack:
        return [n - (n - m) * excess / slack for n, m in zip(natural, least, strict=True)]
    short = sum(m for m in least if m <= _SHORT_WORD)
    long = sum(m for m in least if m > _SHORT_WORD)
    if long == 0 or short >= WIDTH:
        return [m * WIDTH / sum(least) for m in least]
    return [m if m <= _SHORT_WORD else m * (WIDTH - short) / long for m in least]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """Columns sized by :func:`_column_widths`, every cell wrapped text."""
    body = [[str(cell) for cell in row] for row in rows] or [["(none)", *[""] * (len(header) - 1)]]
    widths = _column_widths(header, body)
    cells = [
        [Paragraph(escape(name), _HEAD) for name in header],
        *([Paragraph(escape(cell), _CELL) for cell in row] for row in body),
    ]
    result = Table(
        cells, colWidths=widths, repeatRows=1, hAlign="LEFT", spaceBefore=4, spaceAfter=6
    )
    result.setStyle(_TABLE_STYLE)
    return result


def legend(names: Sequence[str]) -> Table:
    """The series' colours and full names, wrapped, below their chart."""
    rows = [["", Paragraph(escape(name), _CELL)] for name in names]
    result = Table(rows, colWidths=[10, WIDTH - 10], hAlign="LEFT")
    result.setStyle(
        TableStyle(
            [("BACKGROUND", (0, i), (0, i), PALETTE[i % len(PALETTE)]) for i in range(len(rows))]
            + [("TOPPADDING", (0, 0), (-1, -1), 1), ("BOTTOMPADDING", (0, 0), (-1, -1), 1)]
        )
    )
    return result


_LABEL_SIZE = 7
_LABEL_ANGLE = 30


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Sequence[float | None]],
    value_min: float,
    value_max: float | None = None,
) -> list[Flowable]:
    """``title`` (wrapped) above bars per category and series; the slanted category labels
    get the room they need below."""
    longest = max((stringWidth(c, "Helvetica", _LABEL_SIZE) for c in categories), default=0.0)
    below = longest * math.sin(math.radians(_LABEL_ANGLE)) + 2 * _LABEL_SIZE
    # The first slanted label reaches left of its category's middle: start the plot far
    # enough right that it stays on the page.
    half = 1 / (2 * max(1, len(categories)))
    reach = longest * math.cos(math.radians(_LABEL_ANGLE)) + 5
    left = max(40.0, (reach - (WIDTH - 10) * half) / (1 - half))
    drawing = Drawing(WIDTH, 160 + below)
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = left, below, WIDTH - 10 - left, 150
    # None draws no bar: a month without counts is not a month at 0%.
    chart.data = [list(values) for values in series] or [[None]]
    chart.categoryAxis.categoryNames = list(categories)
    chart.categoryAxis.labels.fontName = "Helvetica"
    chart.categoryAxis.labels.fontSize = _LABEL_SIZE
    chart.categoryAxis.labels.angle = _LABEL_ANGLE
    chart.categoryAxis.labels.boxAnchor = "ne"
    chart.valueAxis.labels.fontName = "Helvetica"
    chart.valueAxis.labels.fontSize = _LABEL_SIZE
    chart.valueAxis.valueMin = value_min
    chart.valueAxis.valueMax = value_max
    for i in range(len(series)):
        chart.bars[i].fillColor = PALETTE[i % len(PALETTE)]
    drawing.add(chart)
    return [paragraph(title, "Heading4"), drawing]


@dataclass(frozen=True, slots=True)
class Footer:
    """What every page carries."""

    report: str  # "Report #12, payments, 2026-Q4"
    manifest_sha256: str
    provisional: bool


class PagedCanvas(Canvas):
    """Draws each page's header and footer once the page count is known ("page 2 of 9")."""

    def __init__(self, *args: Any, footer: Footer, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._footer = footer
        self._pages: list[dict[str, Any]] = []

    def showPage(self) -> None:
        self._pages.append(dict(self.__dict__))
        self._startPage()

    def save(self) -> None:
        for number, page in enumerate(self._pages, 1):
            self.__dict__.update(page)
            self._decorate(number, len(self._pages))
            super().showPage()
        super().save()

    def _decorate(self, number: int, pages: int) -> None:
        footer = self._footer
        width, _ = A4
        self.setFont("Helvetica", 7)
        self.setFillColor(colors.black)
        self.drawString(MARGIN, MARGIN - 18, footer.report)
        self.drawRightString(width - MARGIN, MARGIN - 18, f"page {number} of {pages}")
        self.setFont("Courier", 6.5)
        self.drawString(MARGIN, MARGIN - 28, f"manifest.json SHA-256 {footer.manifest_sha256}")
        if footer.provisional:
            self.setFont("Helvetica-Bold", 8)
            self.setFillColor(colors.HexColor("#b00020"))
            self.drawRightString(
                width - MARGIN,
                A4[1] - MARGIN + 12,
                "PROVISIONAL: the quarter had not ended at this report's cut-off",
            )
