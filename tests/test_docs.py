"""The README and the guides in docs/ say what the product does: every setting settings.py
reads is in the configuration reference with its default (and nothing else is), every command
they show exists and accepts the flags shown, every relative link lands, and the README stays
a page a newcomer reads."""

from __future__ import annotations

import ast
import functools
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import CommandError, get_commands, load_command_class

from tests.settings_reads import SETTINGS_PY, EnvReads, settings_reads
from tests.support import PYTHON, ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
MAKEFILE = ROOT / "Makefile"
README_MAX_LINES = 250
SOURCES = ("latencyboard", "ingest", "audits")

# Programs of other projects the guides show, which cannot run here: each maps to the test of
# what latencyboard does with what that program sends or reads (vLLM's and Triton's spans, the
# API call curl makes, the Collector's configuration, the compose file).
EXTERNAL_PROGRAMS = {
    "vllm": "tests/ingest/test_llm_stages.py",
    "sglang.launch_server": "tests/ingest/test_llm_stages.py",
    "tritonserver": "tests/ingest/test_derived_bounds.py",
    "curl": "tests/latencyboard/test_apitokens.py",
    "otelcol-contrib": "tests/latencyboard/test_prometheus_api.py",
    "docker": "tests/test_docker_files.py",
}
# Where a command starts: the project's entry points. Inline code naming anything else
# (`rm -rf var`, `useradd -m`) is prose, not a command to check.
PYTHONS = {"python", "python3", ".venv/bin/python", "$(PY)"}


# ----- reading the pages ---------------------------------------------------------------------


def _without_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _fenced_shell_commands(text: str) -> list[str]:
    """The command lines of ```sh blocks, continuations joined, comments dropped."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] != "export":
                commands.append(shlex.join(words))
    return commands


def _inline_commands(text: str) -> list[str]:
    """Inline code spans that run one of the project's entry points."""
    commands = []
    for span in re.findall(r"`([^`]+)`", _without_fences(text)):
        try:
            words = _program_words(shlex.split(" ".join(span.split())))
        except ValueError:  # an unbalanced quote: a value or a message, not a command
            continue
        if len(words) > 1 and words[0] in {"make", "manage.py", "pytest", *PYTHONS}:
            commands.append(" ".join(span.split()))
    return commands


def _program_words(words: list[str]) -> list[str]:
    """``words`` without leading ``NAME=value`` assignments and ``nice -n N``."""
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words = words[1:]
    if words[:1] == ["nice"]:
        words = words[3:] if words[1:2] == ["-n"] else words[1:]
    return words


def _documented_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for command in _fenced_shell_commands(text) + _inline_commands(text):
            found.append((page.relative_to(ROOT).as_posix(), command))
    return sorted(set(found))


# ----- checking one command ------------------------------------------------------------------


@functools.cache
def _help(argv: tuple[str, ...]) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    run = subprocess.run(
        [*argv, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"{' '.join(argv)} --help failed:\n{run.stderr[-2000:]}"
    return run.stdout


def _unknown_flags(flags: list[str], help_text: str) -> list[str]:
    return [
        flag
        for flag in flags
        if flag.startswith("--")
        and not re.search(rf"(?<![\w-]){re.escape(flag.split('=')[0])}(?![\w-])", help_text)
    ]


def _make_targets() -> dict[str, list[str]]:
    """Each Makefile target and the recipe line that receives ``$(ARGS)``, if one does."""
    targets: dict[str, list[str]] = {}
    current = None
    for line in MAKEFILE.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"([a-z][\w-]*):", line):
            current = match.group(1)
            targets[current] = []
        elif current and line.startswith("\t") and "$(ARGS)" in line:
            targets[current] = shlex.split(line.replace("$(ARGS)", ""))
    return targets


def _check_python(words: list[str]) -> None:
    """``python -m module …``, ``python script.py …`` or ``python manage.py …``."""
    args = words[1:]
    if args[0] == "manage.py":
        _check_manage_py(args[1:])
    elif args[0] == "-m" and args[1] == "pytest":
        for path in (a for a in args[2:] if a.startswith("tests/")):
            assert (ROOT / path).exists(), f"no test file {path}"
    elif args[0] == "-m":
        module = args[1]
        assert module not in EXTERNAL_PROGRAMS, module  # handled by the caller
        unknown = _unknown_flags(args[2:], _help((PYTHON, "-m", module)))
        assert not unknown, f"python -m {module} does not take {unknown}"
    else:
        script = args[0]
        assert (ROOT / script).is_file(), f"no script {script}"
        unknown = _unknown_flags(args[1:], _help((PYTHON, script)))
        assert not unknown, f"{script} does not take {unknown}"


def _check_manage_py(args: list[str]) -> None:
    name, rest = args[0], args[1:]
    commands = get_commands()
    assert name in commands, f"manage.py has no command {name!r}"
    # placeholders of the prose: <id>, [--optional], YYYY-MM-DD
    rest = [
        "1" if re.fullmatch(r"<[^>]+>", a) else a.strip("[]").replace("YYYY-MM-DD", "2026-11-01")
        for a in rest
    ]
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    parser.parse_args(rest)  # a CommandError names what it refused


def _check(command: str) -> None:
    words = _program_words(shlex.split(command))
    program = words[0]
    module = words[2] if program in PYTHONS and words[1:2] == ["-m"] else None
    if program in EXTERNAL_PROGRAMS or module in EXTERNAL_PROGRAMS:
        test = EXTERNAL_PROGRAMS[module or program]
        assert (ROOT / test).is_file(), f"{program} is checked by {test}, which is missing"
    elif program == "make":
        targets = _make_targets()
        target, assignments = words[1], words[2:]
        assert target in targets, f"the Makefile has no target {target!r}"
        for assignment in assignments:
            name, _, value = assignment.partition("=")
            assert name == "ARGS", f"make {target}: {name} is not passed on"
            recipe = targets[target]
            assert recipe, f"make {target} takes no ARGS"
            recipe = [PYTHON if w == "$(PY)" else w for w in recipe]
            _check_python([recipe[0], *recipe[1:], *shlex.split(value)])
    elif program == "manage.py":
        _check_manage_py(words[1:])
    elif program in PYTHONS:
        _check_python(words)
    elif program == "pytest":
        for path in words[1:]:
            assert (ROOT / path).exists(), f"no test file {path}"
    else:
        pytest.fail(f"unknown program {program!r}: check it here or in EXTERNAL_PROGRAMS")


@pytest.mark.parametrize(("page", "command"), _documented_commands())
def test_every_command_in_the_docs_exists_and_takes_its_flags(page: str, command: str) -> None:
    _check(command)


def test_the_readme_starts_with_its_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first_block = re.search(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)

    assert first_block is not None
    assert first_block.group(1).splitlines() == [
        "make run     # the whole product on embedded PostgreSQL + Redis, with demo traffic",
        "make test    # lint, types and every test (real PostgreSQL, Redis, Celery, browsers)",
    ]
    assert {"run", "test"} <= set(_make_targets())


@pytest.mark.parametrize(
    "command",
    [
        "make runn",
        "make run ARGS=--no-such-flag",
        ".venv/bin/python manage.py no_such_command",
        ".venv/bin/python manage.py demo_incident fraud-scorer model_forward --no-such-flag 1",
        "python -m audits.verify ./report-12 --no-such-flag x",
        "make bench-fairness ARGS='--no-such-flag'",
        "tritonserver-nightly --model-repository /models",
    ],
)
def test_the_command_check_refuses_what_does_not_exist(command: str) -> None:
    with pytest.raises((AssertionError, CommandError, pytest.fail.Exception)):
        _check(command)


# ----- the configuration reference -----------------------------------------------------------


@dataclass(frozen=True)
class Row:
    name: str
    default: str
    line: int


def _configuration_rows() -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for number, line in enumerate(CONFIGURATION.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] in {"variable", "---"}:
            continue
        match = re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        assert match, f"docs/configuration.md line {number}: one `VARIABLE` per row: {cells[0]}"
        assert match.group(1) not in rows, f"{match.group(1)} has two rows"
        rows[match.group(1)] = Row(match.group(1), cells[1], number)
    return rows


def _constant(node: ast.expr | None) -> object:
    """The default's value when the source spells it with constants only, else ``...``."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _constant(node.left), _constant(node.right)
        if isinstance(left, int) and isinstance(right, int):
            return left * right
    return ...


def _spelled(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _line_of(source: str, name: str) -> int:
    match = re.search(rf"""["']{name}["']""", source)
    return source.count("\n", 0, match.start()) + 1 if match else 0


def _read_elsewhere(name: str) -> bool:
    """Whether a module of the product (``make run``'s runner, ingest) names the variable."""
    literal = re.compile(rf"""["']{name}["']""")
    return any(
        literal.search(path.read_text(encoding="utf-8"))
        for source in SOURCES
        for path in (ROOT / source).rglob("*.py")
    )


def _default_problems(reads: EnvReads, rows: dict[str, Row]) -> list[str]:
    problems = []
    for name, defaults in sorted(reads.defaults.items()):
        if name not in rows or reads.names[name] & reads.wrappers:
            continue  # a missing row is reported by its own test; wrappers default locally only
        row = rows[name]
        value = _constant(defaults[0])
        shown = re.search(r"`([^`]*)`", row.default)
        if value == "":
            ok = row.default.startswith("—")
            want = "a default cell starting with —"
        elif value is ...:
            ok = bool(row.default) and not row.default.startswith("—")
            want = "a default in words"
        else:
            ok = shown is not None and shown.group(1) == _spelled(value)
            want = f"`{_spelled(value)}` first"
        if not ok:
            problems.append(
                f"docs/configuration.md line {row.line}: {name}'s default reads "
                f"{row.default!r}; latencyboard/settings.py's default wants {want}"
            )
    return problems


def test_every_setting_settings_py_reads_has_a_row_in_the_configuration_reference() -> None:
    reads, rows = settings_reads(), _configuration_rows()
    source = SETTINGS_PY.read_text(encoding="utf-8")
    missing = [
        f"{name} (read at latencyboard/settings.py:{_line_of(source, name)})"
        for name in sorted(set(reads.names) - set(rows))
    ]
    assert not missing, (
        "docs/configuration.md has no row (`| `NAME` | default | meaning |` under its topic) "
        f"for these variables: {missing}"
    )


def test_every_default_in_the_configuration_reference_is_the_one_settings_py_uses() -> None:
    problems = _default_problems(settings_reads(), _configuration_rows())
    assert not problems, "\n".join(problems)


def test_every_variable_in_the_configuration_reference_is_read_by_the_product() -> None:
    reads = settings_reads()
    unread = [
        f"{name} (docs/configuration.md line {row.line})"
        for name, row in _configuration_rows().items()
        if name not in reads.names and not _read_elsewhere(name)
    ]
    assert not unread, f"documented in docs/configuration.md but read nowhere: {unread}"


def test_a_default_that_differs_from_settings_py_is_reported_with_its_line() -> None:
    reads = settings_reads()
    rows = _configuration_rows()
    rows["RETENTION_DAYS"] = Row("RETENTION_DAYS", "`31`", 7)

    problems = _default_problems(reads, rows)

    assert problems == [
        "docs/configuration.md line 7: RETENTION_DAYS's default reads '`31`'; "
        "latencyboard/settings.py's default wants `30` first"
    ]


# ----- links and length ----------------------------------------------------------------------


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    anchors: set[str] = set()
    text = _without_fences(page.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def _links() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = re.sub(r"`[^`]*`", "", _without_fences(page.read_text(encoding="utf-8")))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+:", target):
                found.append((page.relative_to(ROOT).as_posix(), target))
    return found


@pytest.mark.parametrize(("page", "target"), _links())
def test_every_relative_link_lands_on_a_file_and_heading(page: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    destination = (ROOT / page).parent / path if path else ROOT / page
    assert destination.resolve().exists(), f"{page}: {target} points at no file"
    assert destination.resolve().is_relative_to(ROOT), f"{page}: {target} leaves the checkout"
    if anchor:
        assert anchor in _anchors(destination), f"{page}: {path or page} has no heading #{anchor}"


def test_every_guide_is_linked_from_the_readme() -> None:
    linked = {target.partition("#")[0] for page, target in _links() if page == "README.md"}
    guides = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert guides <= linked, f"guides the README does not link: {sorted(guides - linked)}"


def test_the_grafana_dashboard_and_collector_config_are_linked_from_the_guides() -> None:
    links = set(_links())
    assert ("docs/grafana-and-api.md", "grafana/latencyboard-dashboard.json") in links
    assert ("docs/sending-traces.md", "otel-collector.yaml") in links


def test_the_readme_is_a_page_a_newcomer_reads() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/"
    )
