"""The layers of docs/architecture.md hold: imports run down the layers, never up, and no
module imports itself back through others.

The contracts import-linter checks live in pyproject.toml (the core never imports ingest or
audits; storage imports no model, query, service or entry point; pure modules pull in no
framework; the packages of latencyboard stack as the layers docs/architecture.md names).
Two rules import-linter does not express are checked here on its import graph
(grimp's, imports inside functions included): no import circle between modules, and no
module below the entry points imports one.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import grimp
import pytest
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("latencyboard", "ingest", "audits")

# The entry points: what Django, Celery, Channels and the command line call. They parse
# input, check permission and call one service function; nothing below them imports them.
ENTRY_POINT = re.compile(
    r"\.(views|api|api_urls|urls|page_urls|consumers|tasks|admin|management|routing|asgi"
    r"|settings|__main__|apps)(\.|$)"
)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected sets of modules (Tarjan's algorithm, iterative)."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            module, position = work.pop()
            if position == 0:
                index[module] = low[module] = len(index)
                stack.append(module)
                on_stack.add(module)
            children = imports[module]
            if position < len(children):
                work.append((module, position + 1))
                child = children[position]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            if low[module] == index[module]:
                circle = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    circle.append(member)
                    if member == module:
                        break
                if len(circle) > 1:
                    found.append(sorted(circle))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
    return found


def test_the_import_linter_contracts_are_kept(monkeypatch):
    monkeypatch.chdir(ROOT)
    configure()  # what the lint-imports command does first

    assert lint_imports(config_filename="pyproject.toml", cache_dir=None, no_logo=True) is True


def test_the_graph_holds_the_packages(graph):
    # a graph that missed modules would pass every check below
    assert {"latencyboard.alerts.services", "audits.tasks", "ingest.writer"} <= graph.modules


def test_no_module_imports_itself_back_through_others(graph):
    assert _circles(graph) == []


def test_the_circle_search_finds_a_circle():
    graph = grimp.ImportGraph()
    for module in ("a.services", "a.tasks", "a.models"):
        graph.add_module(module)
    graph.add_import(importer="a.services", imported="a.tasks")
    graph.add_import(importer="a.tasks", imported="a.services")
    graph.add_import(importer="a.tasks", imported="a.models")

    assert _circles(graph) == [["a.services", "a.tasks"]]


def test_nothing_below_the_entry_points_imports_one(graph):
    upward = sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        if not ENTRY_POINT.search(importer)
        for imported in graph.find_modules_directly_imported_by(importer)
        if ENTRY_POINT.search(imported)
    )

    assert upward == []


def _contract_options(contract_id: str) -> dict:
    """A contract as import-linter reads it from pyproject.toml (booleans as text)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (options,) = [c for c in config["contracts"] if c["id"] == contract_id]
    return {k: str(v) if isinstance(v, bool) else v for k, v in options.items()}


def _contract(kind: type[Contract], contract_id: str, **session: str) -> Contract:
    """Contract ``contract_id`` of pyproject.toml, to check on a graph of the test's own."""
    options = _contract_options(contract_id)
    return kind(
        name=options["name"],
        session_options={"root_packages": list(PACKAGES), **session},
        contract_options={k: v for k, v in options.items() if k not in ("id", "name", "type")},
    )


def test_the_layers_are_those_the_docs_name():
    # the rows of docs/architecture.md's layer table, top first, each up to its description
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("<!-- layers:", 1)[1].split("```")[1]
    rows = [re.split(r"\s{2,}", row.strip())[0] for row in table.strip().splitlines()]

    assert rows == _contract_options("layers")["layers"]


def test_the_layers_contract_finds_an_up_arrow(graph):
    # given the package graph with one import up the layers: the pure sketch reading a page
    up = copy.deepcopy(graph)
    up.add_import(importer="latencyboard.sketches.sketch", imported="latencyboard.alerts.models")
    contract = _contract(LayersContract, "layers")

    # then the contract that holds for the code is broken by it
    assert contract.check(copy.deepcopy(graph), verbose=False).kept
    assert not contract.check(up, verbose=False).kept


def test_the_pure_contract_finds_a_framework_import_in_a_detector():
    # given the graph with its external packages and a detector deep in the package importing
    # Django through a module of its own package
    graph = grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
    framework = copy.deepcopy(graph)
    framework.add_module("latencyboard.detectors.simulations.settings_reader")
    framework.add_import(
        importer="latencyboard.detectors.simulations.rollouts",
        imported="latencyboard.detectors.simulations.settings_reader",
    )
    framework.add_import(
        importer="latencyboard.detectors.simulations.settings_reader",
        imported="django",
    )
    contract = _contract(ForbiddenContract, "pure", include_external_packages="True")

    # then the contract that holds for the code is broken by it
    assert contract.check(graph, verbose=False).kept
    assert not contract.check(framework, verbose=False).kept
