"""The access rule has one home: which teams a user belongs to is asked of ``teams_of`` (in
``latencyboard/teams/queries.py``) and of the ``visible_to(user, *roles)`` methods built on it.

A filter by team membership anywhere else (``team__in=``, ``channel__team__in=``,
``memberships__user=``, ``Membership.objects.filter(user=…)``) is a second rule that can drift
from the first, so every module of the three packages is walked and searched for one. The walk
finds modules added later without anyone listing them, as the storage-boundary test does.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("latencyboard", "ingest", "audits")
HOME = ROOT / "latencyboard" / "teams" / "queries.py"
RULE_FUNCTIONS = {"teams_of", "visible_to"}

# Lookups that filter by the teams of something: a team set (``team__in``,
# ``pipeline__team_id__in``) or the memberships behind it (``memberships__user``).
MEMBERSHIP_LOOKUP = re.compile(
    r"(?:^|__)team(?:_id)?__in$|(?:^|__)memberships__|(?:^|__)user__teams|^teams__"
)
QUERY_METHODS = {"filter", "exclude", "get", "first"}


def _modules() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts and path != HOME
    ]


def _lookups(node: ast.AST) -> list[str]:
    """The lookup names a call passes: keywords and the string keys of a ``**{…}``."""
    if not isinstance(node, ast.Call):
        return []
    names = [keyword.arg for keyword in node.keywords if keyword.arg is not None]
    for keyword in node.keywords:
        if keyword.arg is None and isinstance(keyword.value, ast.Dict):
            names += [
                key.value
                for key in keyword.value.keys
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            ]
    return names


def _users_memberships(node: ast.AST) -> bool:
    """``Membership.objects.filter(user=…)`` without a team: the teams of a user."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    manager = node.func.value
    if not (
        node.func.attr in QUERY_METHODS
        and isinstance(manager, ast.Attribute)
        and manager.attr == "objects"
        and isinstance(manager.value, ast.Name)
        and manager.value.id == "Membership"
    ):
        return False
    lookups = set(_lookups(node))
    return bool(lookups & {"user", "user_id"}) and not lookups & {"team", "team_id"}


def membership_filters(source: str) -> list[str]:
    """Each membership filter of ``source`` outside a ``teams_of``/``visible_to`` body, as
    ``line: lookup``."""
    found: list[str] = []

    def walk(node: ast.AST, inside_rule: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside_rule = inside_rule or node.name in RULE_FUNCTIONS
        if not inside_rule:
            found.extend(
                f"{node.lineno}: {name}"  # type: ignore[attr-defined]
                for name in _lookups(node)
                if MEMBERSHIP_LOOKUP.search(name)
            )
            if _users_memberships(node):
                found.append(f"{node.lineno}: Membership by user")  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            walk(child, inside_rule)

    walk(ast.parse(source), inside_rule=False)
    return found


def test_the_walk_finds_the_modules():
    # a walk that found nothing would pass every check below
    names = {path.relative_to(ROOT).as_posix() for path in _modules()}
    assert {"latencyboard/alerts/queries.py", "audits/forms.py", "ingest/auth.py"} <= names


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("Pipeline.objects.filter(team__in=teams)", ["1: team__in"], id="team-in"),
        pytest.param(
            "Stage.objects.filter(pipeline__team__in=teams)",
            ["1: pipeline__team__in"],
            id="through-a-relation",
        ),
        pytest.param(
            "Team.objects.filter(memberships__user=user)",
            ["1: memberships__user"],
            id="memberships",
        ),
        pytest.param(
            'Team.objects.filter(**{"memberships__role__in": roles})',
            ["1: memberships__role__in"],
            id="in-a-dict",
        ),
        pytest.param(
            "Membership.objects.filter(user_id=user.pk)", ["1: Membership by user"], id="by-user"
        ),
        pytest.param(
            "def visible_to(self, user):\n    return self.filter(team__in=teams_of(user))",
            [],
            id="inside-visible-to",
        ),
        pytest.param("Pipeline.objects.filter(team=team)", [], id="one-known-team"),
        pytest.param("Membership.objects.filter(team=team, user=admin)", [], id="one-membership"),
    ],
)
def test_the_search_tells_a_membership_filter(source, found):
    assert membership_filters(source) == found


@pytest.mark.parametrize("module", _modules(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_module_scopes_by_the_one_access_rule(module):
    # given a module outside latencyboard/teams/queries.py
    source = module.read_text(encoding="utf-8")

    # when it is searched for a filter by team membership outside teams_of/visible_to
    found = membership_filters(source)

    # then there is none: it asks teams_of or a visible_to
    assert found == []
