"""A report's signature: verified offline from the downloaded files and the public key alone
(no database, no Django), and by ``verify_report`` on the server; a tampered table, a
tampered manifest and a wrong public key are each refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from audits import services, signatures
from audits.models import Report, ReportFile
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role
from tests.audits.offline import verify_offline as _verify_offline
from tests.factories import make_team, make_user
from tests.support import Lines

pytestmark = pytest.mark.django_db


def _built(client: Client) -> tuple[Report, User]:
    team = make_team()
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    auditor = cast(User, make_user(team, Role.AUDITOR))
    report = services.request_report(None, team, 2026, 3, None, auditor, timezone.now())
    assert services.build_report(report.pk)
    client.force_login(auditor)
    return report, auditor


def _download(client: Client, report: Report, folder: Path) -> None:
    """Every file of ``report`` saved as the browser names it."""
    folder.mkdir()
    for name in report.files.values_list("name", flat=True):
        response = client.get(f"/audits/reports/{report.pk}/files/{name}")
        assert response.status_code == 200
        saved = response["Content-Disposition"].split('filename="')[1].rstrip('"')
        (folder / saved).write_bytes(response.content)


def _other_key() -> str:
    return signatures.public_key_of(signatures.new_private_key())


def _add_one_byte(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\n")


def test_downloaded_report_verifies_offline_with_the_public_key_alone(client, tmp_path):
    # given a report downloaded by its auditor, and the server's public key
    report, _ = _built(client)
    _download(client, report, tmp_path / "report")
    public_key = services.signing_key().public_key

    # when it is verified with no database and no Django
    result = _verify_offline(tmp_path / "report", public_key)

    # then every file and the signature check out
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "verified"
    assert lines[0].split()[:2] == ["ok", "signature"]
    assert {line.split()[1] for line in lines[1:-1]} == set(
        report.files.exclude(name="signature.json").values_list("name", flat=True)
    )


@pytest.mark.parametrize("tampered", ["attainment.csv", "manifest.json", "report.pdf"])
def test_a_tampered_file_fails_offline_verification(client, tmp_path, tampered):
    # given a downloaded report with one byte added to one file
    report, _ = _built(client)
    folder = tmp_path / "report"
    _download(client, report, folder)
    _add_one_byte(next(folder.glob(f"*-{tampered}")))

    # when it is verified
    result = _verify_offline(folder, services.signing_key().public_key)

    # then it is not, and the changed file is named
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "NOT VERIFIED"
    failed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == [tampered]


def test_a_manifest_re_signed_with_another_key_fails_with_the_servers_key(client, tmp_path):
    # given a downloaded report whose signature someone replaced with their own
    report, _ = _built(client)
    folder = tmp_path / "report"
    _download(client, report, folder)
    files = {p.name.split("-", 3)[3]: p.read_bytes() for p in folder.iterdir()}
    forged = signatures.sign(signatures.new_private_key(), report.pk, files)
    next(folder.glob("*-signature.json")).write_bytes(forged)

    # when it is verified with the server's key, and with a key that is not one
    result = _verify_offline(folder, services.signing_key().public_key)
    garbage = _verify_offline(folder, base64.b64encode(b"short").decode())

    # then both are refused
    assert (result.returncode, result.stdout.split()[:2]) == (1, ["FAILED", "signature"])
    assert (garbage.returncode, garbage.stdout.split()[:3]) == (1, ["FAILED", "public", "key"])


def test_a_wrong_public_key_fails(client, tmp_path):
    # given an untouched downloaded report
    report, _ = _built(client)
    _download(client, report, tmp_path / "report")

    # when it is verified with another public key
    result = _verify_offline(tmp_path / "report", _other_key())

    # then it is refused
    assert result.returncode == 1
    assert result.stdout.split()[:2] == ["FAILED", "signature"]


@pytest.mark.parametrize(
    ("extra", "failed"),
    [
        ("alerts.csv", ("alerts.csv", "two files for one name")),
        ("waivers.csv", ("waivers.csv", "unexpected")),
    ],
    ids=["forged-table-beside-the-genuine-one", "unlisted-table"],
)
def test_a_file_more_than_the_report_fails_offline_verification(client, tmp_path, extra, failed):
    # given a downloaded report and one more table: a forged alerts table under its plain
    # name beside the genuine download (both are the manifest's alerts.csv), or one the
    # manifest does not list
    report, _ = _built(client)
    folder = tmp_path / "report"
    _download(client, report, folder)
    (folder / extra).write_bytes(b"alert_id,pipeline\n")

    # when it is verified
    result = _verify_offline(folder, services.signing_key().public_key)

    # then it is not, and only that table is named, with why
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "NOT VERIFIED"
    lines = [line.split(None, 2) for line in result.stdout.splitlines()[:-1]]
    assert [(name, detail.split(":")[0]) for word, name, detail in lines if word != "ok"] == [
        failed
    ]


@pytest.mark.parametrize(
    "manifest",
    [
        b"{not json",
        b"\xff\xfe\x00{}",
        b"[]",
        b'{"files": {"attainment.csv": "ab"}}',
        b'{"files": [{"name": 7, "sha256": "ab"}]}',
        b'{"files": [{"name": "attainment.csv"}]}',
        b'{"files": [{"name": "attainment.csv", "sha256": 1' + b"0" * 5000 + b"}]}",
        b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=[
        "bad-json",
        "bad-encoding",
        "not-an-object",
        "files-not-a-list",
        "name-not-a-string",
        "missing-sha256",
        "huge-number",
        "deep-nesting",
    ],
)
def test_a_malformed_signed_manifest_fails_offline_without_a_traceback(client, tmp_path, manifest):
    # given a downloaded report whose manifest is malformed, signed as if by the server
    report, _ = _built(client)
    folder = tmp_path / "report"
    _download(client, report, folder)
    next(folder.glob("*-manifest.json")).write_bytes(manifest)
    files = {p.name.split("-", 3)[3]: p.read_bytes() for p in folder.iterdir()}
    key = services.signing_key()
    resigned = signatures.sign(bytes(key.private_key), report.pk, files)
    next(folder.glob("*-signature.json")).write_bytes(resigned)

    # when it is verified
    result = _verify_offline(folder, key.public_key)

    # then it is refused with a reason, naming the manifest
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "NOT VERIFIED"
    assert ["FAILED", "manifest.json"] in [line.split()[:2] for line in result.stdout.splitlines()]


def test_verify_report_checks_every_file_and_the_signature_then_detects_a_change(client):
    # given a built report
    report, _ = _built(client)
    call_command("verify_report", report.pk, stdout=(out := Lines()))
    assert all(line.split()[0] in {"match", "signed"} for line in out.lines[:-1])
    assert out.lines[-1].split()[:2] == ["chained", "audit_log"]
    assert ("signed", "signature") in [tuple(line.split()[:2]) for line in out.lines]

    # when a stored table changes by one byte
    stored = ReportFile.objects.get(report=report, name="attainment.csv")
    ReportFile.objects.filter(pk=stored.pk).update(content=bytes(stored.content) + b"\n")

    # then verify_report names it and fails
    with pytest.raises(CommandError, match="does not match"):
        call_command("verify_report", report.pk, stdout=(out := Lines()))
    assert [line.split()[1] for line in out.lines if line.split()[0] != "match"][:1] == [
        "attainment.csv"
    ]


def test_the_public_key_is_on_the_reports_page_and_in_the_manifest(client):
    # given a built report
    report, _ = _built(client)
    public_key = services.signing_key().public_key

    # when the auditor opens the reports page and reads the manifest
    page = client.get("/audits/reports/")
    manifest = json.loads(bytes(report.files.get(name="manifest.json").content))

    # then both show the server's public key
    assert public_key.encode() in page.content
    assert manifest["signing"] == {"algorithm": "Ed25519", "public_key": public_key}
