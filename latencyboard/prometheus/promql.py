"""Which series a PromQL query asks for (pure: no Django).

Parsed by ``promql-parser``; answered are what Grafana's Prometheus data source sends for
dashboards of figures that are already aggregated: one vector selector with label matchers
(``=``, ``!=``, ``=~``, ``!~``, and ``or`` between matcher groups), in parentheses or not, and
scalar arithmetic on numbers (Grafana's "Save & test" asks ``1+1``). Anything else (functions,
aggregations, range selectors, binary operations on vectors, ``offset``, ``@``) is
:class:`Unsupported`, which the API answers with Prometheus' error shape and status 400.

Regular expressions are RE2, fully anchored, as in Prometheus, so matching is linear in the
label value whatever the pattern, and at most :data:`MAX_REGEX_LENGTH` characters long.

The expression around the selector is parsed here, without recursion over operator chains
(precedence climbing on two stacks, unary signs counted in a loop), so ``1+1+…+1`` is answered
at any length under :data:`MAX_QUERY_LENGTH`; only parentheses (and a call's) recurse, and a
scan before parsing refuses nesting deeper than :data:`MAX_NESTING`. ``promql-parser`` reads
only a selector's own text, which does not nest: given a whole query, its tree and its parse
time grow with the chain (seconds for 2,000 terms) and its walk overflowed Python's stack.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import promql_parser
import re2

MAX_QUERY_LENGTH: Final = 4096
MAX_NESTING: Final = 64
"""Deepest parentheses (a call's included) a query may nest: far past what dashboards write."""
MAX_REGEX_LENGTH: Final = 256
NAME_LABEL: Final = "__name__"

_SCALAR_OPERATORS: Final[Mapping[str, Callable[[float, float], float]]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": lambda a, b: a / b if b else math.copysign(math.inf, a) if a else math.nan,
}
# PromQL's binary operators by precedence (all left-associative but ``^``, which no query
# here evaluates); only _SCALAR_OPERATORS are answered.
_PRECEDENCE: Final = {
    "or": 1,
    **dict.fromkeys(("and", "unless"), 2),
    **dict.fromkeys(("==", "!=", "<=", "<", ">=", ">"), 3),
    **dict.fromkeys(("+", "-"), 4),
    **dict.fromkeys(("*", "/", "%", "atan2"), 5),
    "^": 6,
}
_TOKEN: Final = re.compile(
    r"""(?P<space>(?:\s|\#[^\n]*)+)
    |(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    |(?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
    |(?P<symbol>=~|!~|==|!=|<=|>=|[-+*/%^<>=(){}\[\],@])""",
    re.VERBOSE,
)
_MODIFIERS: Final = ("offset", "@")


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
    tokens = _tokens(query)
    if nesting(tokens) > MAX_NESTING:
        raise Unsupported(f"The query nests parentheses deeper than {MAX_NESTING} levels.")
    parser = _Parser(query, tokens)
    found = parser.expression()
    parser.expect_end()
    return found


def parse_selector(text: str) -> Selector:
    """A series selector (``match[]`` of the series and label APIs)."""
    found = parse(text)
    if isinstance(found, Scalar):
        raise Unsupported("Expected a series selector, like latencyboard_latency_seconds{}.")
    return found


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # string, number, name, symbol, or end
    text: str
    at: int  # offset in the query


def _tokens(query: str) -> list[_Token]:
    """The query's tokens (strings whole, so brackets inside them are text), then an end."""
    found, at = [], 0
    while at < len(query):
        match = _TOKEN.match(query, at)
        if match is None:
            raise Unsupported(f"parse error: unexpected character {query[at]!r} at {at}")
        kind = match.lastgroup
        assert kind is not None  # every alternative is a named group
        if kind != "space":
            found.append(_Token(kind, match.group(), at))
        at = match.end()
    found.append(_Token("end", "", at))
    return found


def nesting(tokens: list[_Token]) -> int:
    """How deep the parentheses of ``tokens`` nest (a cheap scan, before any parsing)."""
    depth = deepest = 0
    for token in tokens:
        if token.kind == "symbol" and token.text == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif token.kind == "symbol" and token.text == ")":
            depth -= 1
    return deepest


class _Parser:
    """Reads the tokens of one query once, left to right."""

    def __init__(self, query: str, tokens: list[_Token]) -> None:
        self.query, self.tokens, self.next = query, tokens, 0

    def peek(self, offset: int = 0) -> _Token:
        return self.tokens[min(self.next + offset, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.peek()
        self.next += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text or token.kind not in ("symbol", "name"):
            raise _unexpected(token, f"expected {text!r}")

    def expect_end(self) -> None:
        if self.peek().kind != "end":
            raise _unexpected(self.peek(), "expected the end of the query")

    def expression(self) -> Selector | Scalar:
        """Operands joined by binary operators, by precedence climbing on two stacks."""
        operands = [self.unary()]
        operators: list[str] = []
        while (op := self._binary_operator()) is not None:
            while operators and _PRECEDENCE[operators[-1]] >= _PRECEDENCE[op]:
                _reduce(operands, operators.pop())
            operators.append(op)
            operands.append(self.unary())
        while operators:
            _reduce(operands, operators.pop())
        return operands[0]

    def _binary_operator(self) -> str | None:
        token = self.peek()
        if token.kind not in ("symbol", "name") or token.text not in _PRECEDENCE:
            return None
        self.take()
        return token.text

    def unary(self) -> Selector | Scalar:
        """An operand after any number of signs (counted, not nested)."""
        negative = False
        while self.peek().kind == "symbol" and self.peek().text in ("+", "-"):
            negative ^= self.take().text == "-"
        found = self.primary()
        if not negative:
            return found
        if isinstance(found, Scalar):
            return Scalar(-found.value)
        raise Unsupported("A negated series is not supported: select it with label matchers.")

    def primary(self) -> Selector | Scalar:
        token = self.peek()
        if token.kind == "number":
            self.take()
            return Scalar(_number(token.text))
        if token.kind == "symbol" and token.text == "(":
            self.take()
            found = self.expression()
            self.expect(")")
            return found
        if token.kind == "name" and token.text.lower() in ("inf", "nan"):
            self.take()
            return Scalar(float(token.text))
        if token.kind == "name" and self.peek(1).text in ("(", "by", "without"):
            raise Unsupported(
                f"Function {token.text}() is not supported: percentiles, rates and ratios are "
                "served already merged from the rollup sketches per step; select them with "
                "label matchers."
            )
        if token.kind == "name" or (token.kind == "symbol" and token.text == "{"):
            return self.selector()
        if token.kind == "string":
            raise Unsupported(
                "A string is not supported: use a series selector with label matchers."
            )
        raise _unexpected(token, "expected a number, a series selector or '('")

    def selector(self) -> Selector:
        """A metric name and/or label matchers, read by ``promql-parser`` from their text."""
        start = self.peek().at
        if self.peek().kind == "name":
            self.take()
        if self.peek().text == "{" and self.peek().kind == "symbol":
            while self.take().text != "}":
                if self.peek().kind == "end":
                    raise Unsupported("parse error: unclosed left brace")
        end = self.peek().at
        following = self.peek()
        if following.text == "[" and following.kind == "symbol":
            raise Unsupported("Range selectors are not supported: select the series itself.")
        if following.text in _MODIFIERS and following.kind in ("symbol", "name"):
            raise Unsupported("offset and @ modifiers are not supported.")
        try:
            expr = promql_parser.parse(self.query[start:end])
        except ValueError as exc:
            raise Unsupported(f"parse error: {exc}") from None
        if not isinstance(expr, promql_parser.VectorSelector):
            raise Unsupported(f"{type(expr).__name__} is not supported: use a series selector.")
        return _selector(expr)


def _reduce(operands: list[Selector | Scalar], op: str) -> None:
    """Replace the last two operands by ``op`` of them."""
    rhs, lhs = operands.pop(), operands.pop()
    apply = _SCALAR_OPERATORS.get(op)
    if apply is None:
        raise Unsupported(f"The operator {op} is not supported: numbers take + - * / only.")
    if not (isinstance(lhs, Scalar) and isinstance(rhs, Scalar)):
        raise Unsupported(
            "Binary operations are supported between numbers only: the figures are served "
            "already aggregated (select them with label matchers)."
        )
    operands.append(Scalar(apply(lhs.value, rhs.value)))


def _number(text: str) -> float:
    if text[:2] not in ("0x", "0X"):
        return float(text)  # past the largest float: inf, as in Prometheus
    try:
        return float(int(text, 16))
    except OverflowError:
        raise Unsupported(f"parse error: the number {text[:20]}… is too large") from None


def _unexpected(token: _Token, wanted: str) -> Unsupported:
    found = "end of input" if token.kind == "end" else repr(token.text)
    return Unsupported(f"parse error: unexpected {found} at {token.at}: {wanted}")


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
