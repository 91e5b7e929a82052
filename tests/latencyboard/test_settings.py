"""Settings as an operator meets them: processes started with a given environment."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import PYTHON, ROOT

PRODUCTION = {
    "PATH": "/usr/bin:/bin",
    "DEBUG": "false",
    "SECRET_KEY": "p9#u2@x!k7$w4&c1^r8*z5(q3)m6-t0+e_y;f~a|o.l:n/s?j<v>b=d%g{h}i[rZ",
    "DATABASE_URL": "postgresql://latencyboard:pw@db.internal:5432/latencyboard",
    "REDIS_URL": "redis://redis.internal:6379/0",
    "ALLOWED_HOSTS": "latency.example.com",
}


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_deploy_check_with_production_settings_reports_nothing():
    result = _manage(PRODUCTION, "check", "--deploy", "--fail-level", "WARNING")

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize("missing", ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"])
def test_production_refuses_to_start_without_a_required_setting(missing):
    env = {k: v for k, v in PRODUCTION.items() if k != missing}

    result = _manage(env, "check")

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert missing in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DEBUG", "sometimes", "is not a boolean"),
        ("RETENTION_DAYS", "thirty", "is not an integer"),
        ("INGEST_HTTP_PORT", "99999", "above the maximum"),
        ("DATABASE_URL", "mysql://x@y/z", "must point at PostgreSQL"),
        ("BOTTLENECK_STAGE_KINDS", "xgb_score=gpu", "'xgb_score=gpu' is not stage=kind"),
    ],
    ids=["debug", "retention", "port", "not-postgres", "stage-kind"],
)
def test_malformed_values_are_configuration_errors(name, value, message):
    result = _manage({**PRODUCTION, name: value}, "check")

    assert result.returncode != 0
    assert message in result.stderr


def test_a_hot_period_outliving_the_minute_rollups_is_refused():
    result = _manage({**PRODUCTION, "SPAN_HOT_DAYS": "3", "ROLLUP_MINUTE_DAYS": "4"}, "check")

    assert result.returncode != 0
    assert "ROLLUP_MINUTE_DAYS=4 must be at least SPAN_HOT_DAYS + 2 (5)" in result.stderr


def test_a_hot_period_as_long_as_retention_turns_thinning_off_without_more_minutes():
    env = {**PRODUCTION, "SPAN_HOT_DAYS": "30", "RETENTION_DAYS": "30", "ROLLUP_MINUTE_DAYS": "2"}

    result = _manage(env, "check")

    assert result.returncode == 0, result.stderr


def test_local_defaults_need_no_environment():
    result = _manage({"PATH": "/usr/bin:/bin"}, "check")

    assert result.returncode == 0, result.stderr


def test_starttls_and_implicit_tls_for_alert_mail_exclude_each_other():
    result = _manage({**PRODUCTION, "EMAIL_USE_TLS": "true", "EMAIL_USE_SSL": "true"}, "check")

    assert result.returncode != 0
    assert "EMAIL_USE_TLS and EMAIL_USE_SSL exclude each other" in result.stderr


@pytest.mark.parametrize(
    ("env", "backend"),
    [
        ({"PATH": "/usr/bin:/bin"}, "django.core.mail.backends.console.EmailBackend"),
        (
            {"PATH": "/usr/bin:/bin", "EMAIL_HOST": "smtp.example.com"},
            "django.core.mail.backends.smtp.EmailBackend",
        ),
        (PRODUCTION, "django.core.mail.backends.smtp.EmailBackend"),
    ],
    ids=["local", "local-with-smtp", "production"],
)
def test_alert_mail_is_printed_locally_until_an_smtp_server_is_set(env, backend):
    code = "from django.conf import settings; print(settings.EMAIL_BACKEND)"

    result = _manage(env, "shell", "--no-imports", "-c", code)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == backend
