"""Which series a PromQL query asks for (pure: no Django).

Parsed by ``promql-parser``; answered are what Grafana's Prometheus data source sends for
dashboards of figures that are already aggregated: one vector selector with label matchers
(``=``, ``!=``, ``=~``, ``!~``, and ``or`` between matcher groups), in parentheses or not, and
scalar arithmetic on numbers (Grafana's "Save & test" asks ``1+1``). Anything else (functions,
aggregations, range selectors, binary operations on vectors, ``offset``, ``@``) is
:class:`Unsupported`, which the API answers with Prometheus' error shape and status 400.

Regular expressions are RE2, fully anchored, as in Prometheus, so matching is linear in the
label value whatever the pattern, and at most :data:`MAX_REGEX_LENGTH` characters long.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import promql_parser
import re2

MAX_QUERY_LENGTH: Final = 4096
MAX_REGEX_LENGTH: Final = 256
NAME_LABEL: Final = "__name__"

_SCALAR_OPERATORS: Final[Mapping[str, Callable[[float, float], float]]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": lambda a, b: a / b if b else math.copysign(math.inf, a) if a else math.nan,
}


class Unsupported(ValueError):
    """The query is not PromQL, or asks for more than this API answers; the message says what."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """``label`` compared to ``value`` by ``op`` (one of ``= != =~ !~``)."""

    label: str
    op: str
    value: str
    pattern: re2._Regexp | None = None  # compiled for =~ and !~

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` match; a missing label is the empty string, as in Prometheus."""
        given = labels.get(self.label, "")
        if self.op == "=":
            return given == self.value
        if self.op == "!=":
            return given != self.value
        assert self.pattern is not None
        found = self.pattern.fullmatch(given) is not None
        return found if self.op == "=~" else not found


@dataclass(frozen=True, slots=True)
class Selector:
    """Series whose labels (with ``__name__``) match every matcher of one of ``groups``."""

    groups: tuple[tuple[Matcher, ...], ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return any(all(m.matches(labels) for m in group) for group in self.groups)

    def equal_values(self, label: str) -> set[str] | None:
        """The values an ``=`` matcher pins ``label`` to in every group, or None when some
        group leaves it open: lets a reader look up only those."""
        pinned: set[str] = set()
        for group in self.groups:
            values = {m.value for m in group if m.label == label and m.op == "="}
            if not values:
                return None
            pinned |= values
        return pinned


@dataclass(frozen=True, slots=True)
class Scalar:
    value: float


def parse(query: str) -> Selector | Scalar:
    """The series or the number ``query`` asks for; raises :class:`Unsupported`."""
    if len(query) > MAX_QUERY_LENGTH:
        raise Unsupported(f"The query is longer than {MAX_QUERY_LENGTH} characters.")
    try:
        expr = promql_parser.parse(query)
    except ValueError as exc:
        raise Unsupported(f"parse error: {exc}") from None
    return _evaluate(expr)


def parse_selector(text: str) -> Selector:
    """A series selector (``match[]`` of the series and label APIs)."""
    found = parse(text)
    if isinstance(found, Scalar):
        raise Unsupported("Expected a series selector, like latencyboard_latency_seconds{}.")
    return found


def _evaluate(expr: promql_parser.Expr) -> Selector | Scalar:
    if isinstance(expr, promql_parser.ParenExpr):
        return _evaluate(expr.expr)
    if isinstance(expr, promql_parser.NumberLiteral):
        return Scalar(float(expr.val))
    if isinstance(expr, promql_parser.VectorSelector):
        if expr.offset is not None or expr.at is not None:
            raise Unsupported("offset and @ modifiers are not supported.")
        return _selector(expr)
    if isinstance(expr, promql_parser.BinaryExpr):
        lhs, rhs = _evaluate(expr.lhs), _evaluate(expr.rhs)
        apply = _SCALAR_OPERATORS.get(str(expr.op))
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar) and apply is not None:
            return Scalar(apply(lhs.value, rhs.value))
        raise Unsupported(
            "Binary operations are supported between numbers only: the figures are served "
            "already aggregated (select them with label matchers)."
        )
    if isinstance(expr, promql_parser.Call):
        name = getattr(expr.func, "name", str(expr.func))
        raise Unsupported(
            f"Function {name}() is not supported: percentiles, rates and ratios are served "
            "already merged from the rollup sketches per step; select them with label matchers."
        )
    raise Unsupported(
        f"{type(expr).__name__} is not supported: use a series selector with label matchers."
    )


# MatchOp is not hashable: keyed by its name (str() is "MatchOp.Re").
_OPS: Final = {
    "MatchOp.Equal": "=",
    "MatchOp.NotEqual": "!=",
    "MatchOp.Re": "=~",
    "MatchOp.NotRe": "!~",
}


def _selector(expr: promql_parser.VectorSelector) -> Selector:
    name = [Matcher(NAME_LABEL, "=", expr.name)] if expr.name else []
    matchers = expr.matchers
    groups = matchers.or_matchers or [matchers.matchers]
    return Selector(tuple(tuple(name + [_matcher(m) for m in group]) for group in groups))


def _matcher(found: promql_parser.Matcher) -> Matcher:
    op = _OPS[str(found.op)]
    if op in ("=", "!="):
        return Matcher(found.name, op, found.value)
    if len(found.value) > MAX_REGEX_LENGTH:
        raise Unsupported(f"A regular expression may have at most {MAX_REGEX_LENGTH} characters.")
    try:
        pattern = re2.compile(found.value)
    except re2.error as exc:
        raise Unsupported(f"invalid regular expression {found.value!r}: {exc}") from None
    return Matcher(found.name, op, found.value, pattern)
