"""Every ``wait_for_function`` predicate in the browser tests is a function.

Playwright polls a predicate given as a bare expression by ``eval``-ing it in the page, which
the pages' Content Security Policy (``script-src 'self'``) refuses; the poll then fails, but
only when the condition was not already true at its first check, which a quick machine hides.
A predicate written as a function is called, never ``eval``-ed.
"""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).parent
FUNCTION_STARTS = ("(", "function", "async")


def predicate_text(node: ast.expr) -> str | None:
    """The leading text of a predicate written in the source, or None for a name or call."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value
            for part in node.values
            if isinstance(part, ast.Constant) and isinstance(part.value, str)
        )
    return None


def expression_predicates(source: str) -> list[tuple[int, str]]:
    """(line, text) of each ``wait_for_function`` predicate that is not a function."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "wait_for_function"
            and node.args
        ):
            continue
        text = predicate_text(node.args[0])
        if text is not None and not (
            text.lstrip().startswith(FUNCTION_STARTS) and ("=>" in text or "function" in text)
        ):
            found.append((node.lineno, text))
    return found


def test_an_expression_predicate_is_found():
    source = 'page.wait_for_function("window.ready === true")\npage.wait_for_function(f"x {1}")'
    assert [line for line, _ in expression_predicates(source)] == [1, 2]
    assert expression_predicates('page.wait_for_function("() => window.ready")') == []


def test_every_browser_test_predicate_is_a_function():
    found = {
        f"{path.name}:{line}": text
        for path in sorted(HERE.glob("*.py"))
        for line, text in expression_predicates(path.read_text())
    }
    assert found == {}
