"""Static checks of the Docker deployment files (no Docker engine and no database needed).

docker/compose.yaml is parsed with PyYAML, docker/Dockerfile and .dockerignore as text, and the
variables latencyboard/settings.py reads are collected from its source (tests/settings_reads.py),
so adding a setting without documenting it in docker/.env.example fails here. Two checks run
Django in a subprocess: the Dockerfile's build-time ``collectstatic`` with its dummy values,
and ``check --deploy`` with the values of docker/.env.example. docker/entrypoint.sh is run
with ``sh``.
"""

from __future__ import annotations

import http.server
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.settings_reads import settings_reads

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
ENV_EXAMPLE = DOCKER / ".env.example"
ENTRYPOINT = DOCKER / "entrypoint.sh"
DOCKERIGNORE = ROOT / ".dockerignore"

INFRA_SERVICES = {"postgres", "redis"}
APP_SERVICES = {"migrate", "web", "ingest", "worker", "notifier", "beat"}
LONG_RUNNING = (INFRA_SERVICES | APP_SERVICES) - {"migrate"}
# Required whenever DEBUG is off; ALLOWED_HOSTS is enforced by its own check in settings.py.
ALWAYS_REQUIRED = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"}
PLACEHOLDER = "CHANGE-ME"
NAME = re.compile(r"[A-Z][A-Z0-9_]*")
ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - containers must listen beyond their loopback


# ----- helpers -------------------------------------------------------------------------------


def _env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f".env.example: not NAME=value: {line!r}"
            values[name.strip()] = value
    return values


def _compose() -> dict[str, Any]:
    with COMPOSE.open(encoding="utf-8") as f:
        data = yaml.safe_load(f)
    assert isinstance(data, dict)
    return data


def _services() -> dict[str, dict[str, Any]]:
    return _compose()["services"]


def _command(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _healthcheck_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(str(t) for t in test)


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continuation"
    return instructions


def _final_stage() -> list[tuple[str, str]]:
    instructions = _dockerfile()
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    return instructions[last_from:]


def _collectstatic_env() -> dict[str, str]:
    """The NAME=value prefix of the Dockerfile's collectstatic RUN."""
    runs = [args for k, args in _dockerfile() if k == "RUN" and "collectstatic" in args]
    assert len(runs) == 1, "the Dockerfile should run collectstatic exactly once"
    env: dict[str, str] = {}
    for token in shlex.split(runs[0]):
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", token):
            break
        name, _, value = token.partition("=")
        env[name] = value
    return env


def _django_env(extra: dict[str, str], var_dir: Path) -> dict[str, str]:
    """A clean environment: nothing from the caller's shell leaks into the settings."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    env.update(extra)
    env["DJANGO_SETTINGS_MODULE"] = "latencyboard.settings"
    env["LATENCYBOARD_VAR_DIR"] = str(var_dir)
    env["STATIC_ROOT"] = str(var_dir / "staticfiles")
    return env


# ----- docker/.env.example versus settings.py --------------------------------------------------


def test_settings_reads_only_literal_variable_names() -> None:
    reads = settings_reads()
    assert not reads.dynamic, (
        "settings.py reads environment variables whose names are not string literals, so "
        f"this test cannot check docker/.env.example for them: {reads.dynamic}"
    )


def test_env_example_lists_every_variablesettings_reads() -> None:
    read = set(settings_reads().names)
    assert {"DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"} <= read, (
        f"the settings.py parser found too little: {sorted(read)}"
    )
    missing = sorted(read - set(_env_example()))
    assert not missing, (
        f"read by latencyboard/settings.py but missing in docker/.env.example: {missing}"
    )


def test_env_example_every_variable_once_with_a_comment_line_above() -> None:
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    seen: set[str] = set()
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, value = line.partition("=")
        assert NAME.fullmatch(name), f"line {i + 1}: bad variable name {name!r}"
        assert name not in seen, f"{name} is listed twice"
        seen.add(name)
        above = lines[i - 1] if i else ""
        assert above.startswith("# "), f"{name} has no comment on the line above"
        # env_file and ${} substitution would treat these specially; keep values literal.
        assert not re.search(r"[\"'$`]|\s#", value), f"{name}: keep the value literal: {value!r}"


def test_env_example_values_are_production_safe() -> None:
    example = _env_example()
    reads = settings_reads()
    assert example["DEBUG"] == "false"
    # Names read through a settings.py wrapper such as _required_in_production.
    wrapped = {name for name, via in reads.names.items() if via & reads.wrappers}
    assert "SECRET_KEY" in wrapped
    for name in sorted(ALWAYS_REQUIRED | wrapped):
        assert example.get(name), f"{name} is required with DEBUG off but empty in .env.example"
    for name in ("SECRET_KEY", "POSTGRES_PASSWORD", "REDIS_PASSWORD"):
        assert PLACEHOLDER in example[name], f"{name} should be a {PLACEHOLDER} placeholder"
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
        assert example[name] == "true", name
    assert int(example["SECURE_HSTS_SECONDS"]) >= 31_536_000

    owner = urlsplit(example["DATABASE_MIGRATION_URL"])
    app = urlsplit(example["DATABASE_URL"])
    for database in (owner, app):
        assert database.scheme == "postgresql"
        assert (database.hostname, database.port) == ("postgres", 5432)
        assert database.path == f"/{example['POSTGRES_DB']}"
    # migrations run as the owner; the application has a role of its own (not the superuser)
    assert owner.username == example["POSTGRES_USER"]
    assert owner.password == example["POSTGRES_PASSWORD"]
    assert app.username != example["POSTGRES_USER"]
    assert PLACEHOLDER in (app.password or "")
    redis = urlsplit(example["REDIS_URL"])
    assert (redis.scheme, redis.hostname, redis.port) == ("redis", "redis", 6379)
    assert redis.password == example["REDIS_PASSWORD"]
    assert example["LATENCYBOARD_VAR_DIR"] == "/app/var", "the image collected static files there"


def test_env_example_passes_django_deploy_checks(tmp_path: Path) -> None:
    env = _django_env(_env_example(), tmp_path)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "security.W" not in output, output


# ----- docker/compose.yaml -----------------------------------------------------------------------


def test_compose_has_the_services() -> None:
    assert set(_services()) == INFRA_SERVICES | APP_SERVICES


def test_compose_infrastructure_services() -> None:
    compose = _compose()
    services = compose["services"]
    assert str(services["postgres"]["image"]).startswith("postgres:16")
    assert str(services["redis"]["image"]).startswith("redis:7")
    assert "pg_isready" in _healthcheck_text(services["postgres"])
    assert "redis-cli" in _healthcheck_text(services["redis"])
    mounts = {v.split(":")[1]: v.split(":")[0] for v in services["postgres"]["volumes"]}
    assert mounts.get("/var/lib/postgresql/data") in compose["volumes"], "postgres needs a volume"
    for name in INFRA_SERVICES:
        assert "env_file" not in services[name], f"{name} should not receive the app secrets"


def test_compose_app_services_share_one_image_and_the_env_file() -> None:
    services = _services()
    images = {services[name]["image"] for name in APP_SERVICES}
    assert len(images) == 1, f"one image for all roles, got {images}"
    for name in APP_SERVICES:
        service = services[name]
        assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}, name
        env_files = service["env_file"]
        env_files = [env_files] if isinstance(env_files, str | dict) else env_files
        paths = [e["path"] if isinstance(e, dict) else e for e in env_files]
        assert ".env" in paths, f"{name} should read docker/.env"
        assert service["command"], f"{name} needs its role as command"
        for volume in service.get("volumes", []):
            target = volume["target"] if isinstance(volume, dict) else volume.split(":")[1]
            assert str(target).rstrip("/") not in {"/app", "/app/var"}, (
                f"{name}: a volume over {target} hides the static files collected at build time"
            )
        for variable in service.get("environment", {}):
            assert variable in _env_example(), f"{name} sets {variable}, not in .env.example"


def test_compose_restart_policies() -> None:
    services = _services()
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
    assert services["migrate"]["restart"] == "no", "a one-shot must not be restarted"


def test_compose_depends_on_conditions() -> None:
    services = _services()
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in APP_SERVICES - {"migrate"}:
        assert services[name]["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
            "migrate": {"condition": "service_completed_successfully"},
        }, name
    for name in INFRA_SERVICES:
        assert "depends_on" not in services[name]


def test_compose_commands() -> None:
    services = _services()
    assert _command(services["migrate"]) == ["python", "manage.py", "migrate", "--noinput"]
    web = _command(services["web"])
    assert web[:2] == ["uvicorn", "latencyboard.asgi:application"]
    assert web[web.index("--host") + 1] == ALL_INTERFACES
    assert web[web.index("--port") + 1] == "8000"
    assert web[web.index("--http") + 1] == "latencyboard.header_timeout:HeaderTimeoutProtocol"
    ingest = _command(services["ingest"])
    assert ingest[:3] == ["python", "-m", "ingest"]
    assert ingest[ingest.index("--host") + 1] == ALL_INTERFACES
    assert ingest[ingest.index("--http-port") + 1] == "4318"
    assert ingest[ingest.index("--grpc-port") + 1] == "4317"
    assert _command(services["worker"])[:4] == ["celery", "-A", "latencyboard", "worker"]
    assert _command(services["beat"])[:4] == ["celery", "-A", "latencyboard", "beat"]


def test_compose_delivers_notifications_on_a_worker_of_their_own() -> None:
    services = _services()
    worker, notifier = _command(services["worker"]), _command(services["notifier"])
    assert "--queues=celery,reports" in worker
    assert notifier[:4] == ["celery", "-A", "latencyboard", "worker"]
    assert "--queues=notifications" in notifier


def test_compose_published_ports() -> None:
    def container_ports(service: dict[str, Any]) -> set[str]:
        return {str(p).rsplit(":", 1)[-1].split("/")[0] for p in service.get("ports", [])}

    services = _services()
    assert container_ports(services["web"]) == {"8000"}
    assert container_ports(services["ingest"]) == {"4317", "4318"}
    for name in INFRA_SERVICES | {"migrate", "worker", "notifier", "beat"}:
        assert "ports" not in services[name], f"{name} should not be published"


def test_compose_healthchecks() -> None:
    services = _services()
    assert "http://localhost:8000/healthz" in _healthcheck_text(services["web"])
    assert "http://localhost:4318/healthz" in _healthcheck_text(services["ingest"])
    for name in LONG_RUNNING - {"beat"}:
        assert services[name]["healthcheck"]["test"], name


def test_compose_variables_are_in_env_example() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    # $$ escapes a literal $ for the container's shell; compose does not substitute it.
    used = set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    used |= set(re.findall(r"(?<!\$)\$([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used, "expected ${...} substitutions in compose.yaml"
    missing = sorted(used - set(_env_example()))
    assert not missing, f"compose.yaml substitutes variables missing in .env.example: {missing}"


def test_compose_documents_scaling() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    assert "--scale ingest=" in text
    assert "--scale worker=" in text


def test_compose_config_with_the_docker_cli(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker CLI not installed: `docker compose config` not checked")
    version = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=30
    )
    if version.returncode != 0:
        pytest.skip(
            "docker CLI has no compose plugin, `docker compose config` not checked: "
            + (version.stderr or version.stdout).strip().splitlines()[0]
        )
    (tmp_path / "docker").mkdir()
    shutil.copy(COMPOSE, tmp_path / "docker" / "compose.yaml")
    shutil.copy(ENV_EXAMPLE, tmp_path / "docker" / ".env")
    result = subprocess.run(
        [docker, "compose", "-f", str(tmp_path / "docker" / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# ----- docker/Dockerfile and .dockerignore -------------------------------------------------------


def test_dockerfile_base_image_user_and_ports() -> None:
    instructions = _dockerfile()
    bases = [args.split()[0] for k, args in instructions if k == "FROM"]
    assert bases, "no FROM"
    assert all(b == "python:3.11-slim" for b in bases), bases
    final = _final_stage()
    users = [args for k, args in final if k == "USER"]
    assert users, "the runtime stage needs a USER"
    assert users[-1].split(":")[0] not in {"root", "0"}, f"runs as {users[-1]}"
    exposed = {p.split("/")[0] for k, args in final if k == "EXPOSE" for p in args.split()}
    assert exposed == {"8000", "4317", "4318"}


def test_dockerfile_installs_from_pyproject() -> None:
    runs = [args for k, args in _dockerfile() if k == "RUN"]
    assert any(re.search(r"\bpip install \.(\s|$)", run) for run in runs), (
        "install the project with `pip install .`"
    )
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert "requirements" not in text, "dependencies live in pyproject.toml only"


def test_dockerfile_has_no_cmd_and_an_exec_entrypoint() -> None:
    final = _final_stage()
    assert not [a for k, a in final if k == "CMD"], "the compose command chooses the role"
    entrypoints = [a for k, a in final if k == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    assert entrypoints[0].startswith("["), "exec form, so signals reach the process"


def test_dockerfile_build_only_values_stay_out_of_the_image_environment() -> None:
    env = _collectstatic_env()
    assert env.get("DEBUG") == "false", "collect with the production storage (manifest)"
    missing = ALWAYS_REQUIRED - set(env)
    assert not missing, f"collectstatic needs dummy values for {missing}"
    persisted = " ".join(a for k, a in _dockerfile() if k in {"ENV", "ARG"})
    for name in ALWAYS_REQUIRED:
        assert not re.search(rf"\b{name}=", persisted), f"{name} must not be baked into the image"
    assert "DJANGO_SETTINGS_MODULE=latencyboard.settings" in persisted
    # settings.py defaults DEBUG to true; the image must not.
    assert re.search(r"\bDEBUG=false\b", " ".join(a for k, a in _final_stage() if k == "ENV"))


def test_dockerfile_collectstatic_step_runs_with_its_build_values(tmp_path: Path) -> None:
    env = _django_env(_collectstatic_env(), tmp_path)
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "staticfiles" / "staticfiles.json").is_file(), "manifest storage expected"


def test_dockerignore_admits_only_the_sources() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", ".dockerignore should be an allowlist"
    admitted = {p[1:] for p in patterns if p.startswith("!")}
    with (ROOT / "pyproject.toml").open("rb") as f:
        find = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.rstrip("*").rstrip(".") for p in find}
    # BASE_DIR folders settings.py uses at run time, and the files the build needs.
    needed = packages | {
        "templates",
        "static",
        "pyproject.toml",
        "manage.py",
        "docker/entrypoint.sh",
    }
    assert needed <= admitted, f"not admitted into the build context: {needed - admitted}"
    assert not any(".env" in p or p.startswith((".venv", "var", "tests")) for p in admitted)
    for pattern in ("**/__pycache__", "**/.env"):
        assert pattern in patterns


# ----- docker/entrypoint.sh ----------------------------------------------------------------------


def _run_entrypoint(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_entrypoint_syntax_and_mode() -> None:
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT)], timeout=30).returncode == 0
    assert ENTRYPOINT.read_text(encoding="utf-8").startswith("#!/bin/sh\n")
    assert os.access(ENTRYPOINT, os.X_OK), "chmod +x docker/entrypoint.sh"


def test_entrypoint_without_a_command_explains_the_roles() -> None:
    result = _run_entrypoint()
    assert result.returncode == 64
    assert "celery -A latencyboard beat" in result.stderr


def test_entrypoint_runs_the_command_and_refuses_placeholders() -> None:
    ok = _run_entrypoint("sh", "-c", "echo role-ran")
    assert (ok.returncode, ok.stdout) == (0, "role-ran\n")
    refused = _run_entrypoint("sh", "-c", "echo role-ran", SECRET_KEY=_env_example()["SECRET_KEY"])
    assert refused.returncode == 78
    assert "SECRET_KEY" in refused.stderr
    assert "role-ran" not in refused.stdout


@pytest.fixture
def http_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            if self.path == "/healthz":
                self.send_response(200)
            else:  # what SECURE_SSL_REDIRECT answers
                self.send_response(301)
                self.send_header("Location", "https://latency.example.com/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_entrypoint_healthcheck(http_server: tuple[str, list[dict[str, str]]]) -> None:
    base, seen = http_server
    healthy = _run_entrypoint(
        "healthcheck", f"{base}/healthz", ALLOWED_HOSTS=" .example.org,latency.example.com"
    )
    assert healthy.returncode == 0, healthy.stderr
    assert seen[-1]["Host"] == "example.org"
    assert seen[-1]["X-Forwarded-Proto"] == "https"

    redirected = _run_entrypoint("healthcheck", f"{base}/elsewhere")
    assert redirected.returncode == 1
    assert "301" in redirected.stderr
    assert len(seen) == 2, "the healthcheck must not follow redirects"

    down = _run_entrypoint("healthcheck", "http://127.0.0.1:9/healthz")
    assert down.returncode == 1
    assert "unhealthy" in down.stderr
