"""The environment variables latencyboard/settings.py reads, found in its source with ``ast``.

docker/.env.example (tests/test_docker_files.py) and docs/configuration.md (tests/test_docs.py)
are both checked against them, so a new setting has to be documented in both.
"""

from __future__ import annotations

import ast

from tests.support import ROOT

SETTINGS_PY = ROOT / "latencyboard" / "settings.py"
ENV_PY = ROOT / "latencyboard" / "env.py"


class EnvReads(ast.NodeVisitor):
    """Collects the environment variable names a module reads.

    Reads are calls of the reader functions (those defined in latencyboard/env.py plus wrappers
    defined in the module that pass their first parameter on to one, like
    ``_required_in_production``), ``os.environ.get/[]`` and ``os.getenv``. A name that is not a
    string literal is recorded in ``dynamic`` unless it is a parameter of the enclosing function
    (the reader passing its argument along).
    """

    def __init__(self, readers: set[str]) -> None:
        self.readers = readers
        self.wrappers: set[str] = set()
        self.names: dict[str, set[str]] = {}  # variable -> functions that read it
        # variable -> the default expression of each reader call (None: the reader's own)
        self.defaults: dict[str, list[ast.expr | None]] = {}
        self.dynamic: list[str] = []
        self._params: list[set[str]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._params.append({a.arg for a in node.args.args + node.args.kwonlyargs})
        self.generic_visit(node)
        self._params.pop()

    def _record(self, arg: ast.expr | None, via: str, lineno: int) -> None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            self.names.setdefault(arg.value, set()).add(via)
        elif not (self._params and self._mentions_only_params(arg)):
            self.dynamic.append(f"line {lineno}: {via}({ast.unparse(arg) if arg else '?'})")

    def _mentions_only_params(self, arg: ast.expr | None) -> bool:
        if arg is None:
            return False
        names = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
        return bool(names) and names <= self._params[-1]

    @staticmethod
    def _is_environ(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == "environ") or (
            isinstance(node, ast.Attribute) and node.attr == "environ"
        )

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        first = node.args[0] if node.args else None
        if first is None:
            first = next((k.value for k in node.keywords if k.arg in {"name", "key"}), None)
        if isinstance(func, ast.Name) and func.id in self.readers | {"getenv"}:
            self._record(first, func.id, node.lineno)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                default = node.args[1] if len(node.args) > 1 else None
                default = next((k.value for k in node.keywords if k.arg == "default"), default)
                self.defaults.setdefault(first.value, []).append(default)
        elif isinstance(func, ast.Attribute) and (
            func.attr == "getenv"
            or (func.attr in {"get", "pop", "setdefault"} and self._is_environ(func.value))
        ):
            self._record(first, ast.unparse(func), node.lineno)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        """``env_list("X") or fallback``: the fallback is X's default."""
        self.generic_visit(node)
        first = node.values[0]
        if (
            isinstance(node.op, ast.Or)
            and isinstance(first, ast.Call)
            and isinstance(first.func, ast.Name)
            and first.func.id in self.readers
            and first.args
            and isinstance(first.args[0], ast.Constant)
        ):
            name = first.args[0].value
            if isinstance(name, str) and name in self.defaults:
                self.defaults[name][-1] = node.values[1]

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self._is_environ(node.value):
            self._record(node.slice, "environ[]", node.lineno)
        self.generic_visit(node)


def settings_reads() -> EnvReads:
    env_tree = ast.parse(ENV_PY.read_text(encoding="utf-8"))
    env_functions = {n.name for n in env_tree.body if isinstance(n, ast.FunctionDef)}
    assert {"env_str", "env_bool", "env_int", "env_list"} <= env_functions
    readers = set(env_functions)

    settings_tree = ast.parse(SETTINGS_PY.read_text(encoding="utf-8"))
    # Wrappers: module functions handing their first parameter to a reader (to a fixed point).
    functions = [n for n in settings_tree.body if isinstance(n, ast.FunctionDef)]
    changed = True
    while changed:
        changed = False
        for fn in functions:
            if fn.name in readers or not fn.args.args:
                continue
            param = fn.args.args[0].arg
            for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                if (
                    isinstance(call.func, ast.Name)
                    and call.func.id in readers
                    and call.args
                    and isinstance(call.args[0], ast.Name)
                    and call.args[0].id == param
                ):
                    readers.add(fn.name)
                    changed = True
                    break

    reads = EnvReads(readers)
    reads.visit(settings_tree)
    env_reads = EnvReads(readers)  # env.py itself reads NAME / NAME_FILE given as parameters
    env_reads.visit(env_tree)
    for name, via in env_reads.names.items():
        reads.names.setdefault(name, set()).update(via)
    reads.dynamic += [f"env.py {d}" for d in env_reads.dynamic]
    reads.wrappers = readers - env_functions
    return reads
