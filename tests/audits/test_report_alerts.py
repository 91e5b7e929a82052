"""The report's alerts: every alert of the quarter with when and by whom it was acknowledged
and resolved, read as of the report's request, and never another team's."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path
from typing import cast

import pytest
from django.contrib.auth.models import User

from audits import services
from audits.log import record
from audits.models import Report, ReportStatus
from latencyboard.alerts.models import Alert, AlertEvent, Rule, Severity
from latencyboard.audit_trail import Subject
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Role, Team
from tests.factories import incident_for, make_team, make_user

pytestmark = pytest.mark.django_db

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "reports"
REQUESTED_AT = dt.datetime(2026, 9, 20, 12, 0, tzinfo=dt.UTC)
HEADER = (
    "alert_id,pipeline,stage,rule,severity,started_at,acknowledged_at,acknowledged_by,"
    "resolved_at,resolved_by,seconds_to_acknowledge,seconds_to_resolve,summary"
)


def at(month: int, day: int, hour: int, minute: int, second: int, micro: int = 0) -> dt.datetime:
    return dt.datetime(2026, month, day, hour, minute, second, micro, tzinfo=dt.UTC)


def alert(
    rule: Rule, stage: Stage | None, started: dt.datetime, summary: str, status: str
) -> Alert:
    """An alert and its firing event, as the evaluator writes them."""
    made = Alert.objects.create(
        rule=rule,
        pipeline=rule.pipeline,
        stage=stage,
        incident=incident_for(rule.pipeline, status, started),
        dedup_key=f"{rule.pk}:{stage.pk if stage else 'e2e'}:{started.isoformat()}",
        status=status,
        summary=summary,
        started_at=started,
    )
    AlertEvent.objects.create(alert=made, from_status="", to_status="firing", at=started)
    return made


def event(made: Alert, old: str, new: str, when: dt.datetime, who: User | None) -> None:
    AlertEvent.objects.create(alert=made, from_status=old, to_status=new, at=when, who=who)


def team_with_alerts() -> tuple[Team, Pipeline, dict[str, Alert], User]:
    """A team whose fraud-scorer fired in and around 2026 Q3, and an outsider team's alert
    in the same quarter."""
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    forward = Stage.objects.create(pipeline=pipeline, name="model_forward")
    page = Rule.objects.create(pipeline=pipeline, name="tail latency", severity=Severity.PAGE)
    ticket = Rule.objects.create(pipeline=pipeline, name="slow drift", severity=Severity.TICKET)
    oncall = cast(User, make_user(team, Role.ONCALL))
    alerts = {
        "before": alert(page, forward, at(6, 30, 23, 59, 59), "p99 up before Q3", "resolved"),
        "handled": alert(page, forward, at(7, 3, 10, 0, 0, 400_000), "p99 +40%", "resolved"),
        "automatic": alert(ticket, None, at(8, 1, 0, 0, 0), "end-to-end p95 +25%", "resolved"),
        "open": alert(page, forward, at(9, 10, 8, 30, 15), "p99.9 +60%", "resolved"),
        "later": alert(page, None, at(9, 25, 1, 0, 0), "after the request", "firing"),
    }
    # Acknowledged after 4 min 30 s (as printed: 10:04:30 - 10:00:00), silenced, resolved.
    event(alerts["handled"], "firing", "acknowledged", at(7, 3, 10, 4, 30, 900_000), oncall)
    event(alerts["handled"], "acknowledged", "acknowledged", at(7, 3, 10, 5, 0), oncall)
    event(alerts["handled"], "acknowledged", "resolved", at(7, 3, 11, 0, 0, 100_000), oncall)
    event(alerts["automatic"], "firing", "resolved", at(8, 1, 0, 20, 0), None)
    event(alerts["open"], "firing", "acknowledged", at(9, 10, 8, 31, 0), oncall)
    # Resolved after the report was requested: the report still shows it open.
    event(alerts["open"], "acknowledged", "resolved", at(9, 21, 9, 0, 0), oncall)

    other = make_team()
    theirs = Pipeline.objects.create(team=other, service_name="fraud-scorer")
    their_rule = Rule.objects.create(pipeline=theirs, name="tail latency")
    alerts["outsider"] = alert(their_rule, None, at(7, 5, 0, 0, 0), "another team's", "firing")
    return team, pipeline, alerts, oncall


def build(team: Team) -> Report:
    """A report of ``team``'s 2026 Q3 requested at ``REQUESTED_AT``, built as the worker would."""
    requester = cast(User, make_user(team, Role.AUDITOR))
    report = services.request_report(None, team, 2026, 3, None, requester, REQUESTED_AT)
    services.build_report(report.pk, REQUESTED_AT)
    report.refresh_from_db()
    return report


def stored(report: Report, name: str) -> bytes:
    return bytes(report.files.get(name=name).content)


def test_alerts_csv_lists_each_alert_of_the_quarter_with_its_handling_times():
    # given alerts before, in and after the quarter (and after the request), one of another team
    team, _, alerts, oncall = team_with_alerts()

    # when the quarter's report is built
    report = build(team)

    # then alerts.csv lists this team's alerts started in the quarter by the request, exactly
    who = oncall.username
    handled, automatic, still_open = alerts["handled"], alerts["automatic"], alerts["open"]
    assert report.status == ReportStatus.DONE
    assert stored(report, "alerts.csv").decode().splitlines() == [
        HEADER,
        f"{handled.pk},fraud-scorer,model_forward,tail latency,page,2026-07-03T10:00:00Z,"
        f"2026-07-03T10:04:30Z,{who},2026-07-03T11:00:00Z,{who},270,3600,p99 +40%",
        f"{automatic.pk},fraud-scorer,end-to-end,slow drift,ticket,2026-08-01T00:00:00Z,"
        f",,2026-08-01T00:20:00Z,automatic,,1200,end-to-end p95 +25%",
        f"{still_open.pk},fraud-scorer,model_forward,tail latency,page,2026-09-10T08:30:15Z,"
        f"2026-09-10T08:31:00Z,{who},,,45,,p99.9 +60%",
    ]


def test_the_manifest_lists_alerts_csv_and_the_pdf_has_the_alerts_section():
    # given a team's alerts in the quarter
    team, _, _, _ = team_with_alerts()

    # when the report is built
    report = build(team)

    # then the manifest lists alerts.csv with its hash, and the PDF shows the summary and list
    manifest = json.loads(stored(report, "manifest.json"))
    listed = {f["name"]: f["sha256"] for f in manifest["files"]}
    assert listed["alerts.csv"] == report.files.get(name="alerts.csv").sha256
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pdf = ARTIFACTS / "alerts.pdf"
    pdf.write_bytes(stored(report, "report.pdf"))
    pdftotext = shutil.which("pdftotext")
    assert pdftotext is not None
    text = subprocess.run(
        [pdftotext, "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    # For a person to look at: the section beside the others.
    pages = ARTIFACTS / "alerts"
    subprocess.run(["pdftoppm", "-png", "-r", "70", str(pdf), str(pages)], check=True)
    assert "Alerts and their handling" in text
    # fraud-scorer: 3 alerts, 2 acknowledged (median 157.5 s, max 270 s), 2 resolved
    # (median 2400.0 s, max 3600 s).
    assert "fraud-scorer 3 2 157.5 270 2 2400.0 3600" in " ".join(text.split())
    assert "Time to acknowledge and time to resolve are whole seconds" in " ".join(text.split())


def test_a_rebuild_after_later_alerts_transitions_and_rule_edits_gives_identical_bytes():
    # given a built report, its rule's creation in the audit log
    team, pipeline, alerts, oncall = team_with_alerts()
    rule = Rule.objects.get(pipeline=pipeline, name="tail latency")
    subject = Subject("alert_rule", rule.pk, rule.name, team.pk)
    created = {"name": "tail latency", "severity": "page"}
    record(None, "alert_rule.created", subject, created, actor=oncall, now=at(6, 1, 0, 0, 0))
    report = build(team)
    before = {f.name: bytes(f.content) for f in report.files.all()}

    # when, after it was requested, alerts are handled, new ones fire and the rule is edited,
    # and it is verified
    event(alerts["later"], "firing", "acknowledged", at(9, 25, 1, 5, 0), oncall)
    alert(rule, None, at(9, 26, 0, 0, 0), "newer still", "firing")
    edited = {"name": "tail p99", "severity": "ticket"}
    Rule.objects.filter(pk=rule.pk).update(**edited)
    record(None, "alert_rule.changed", subject, edited, actor=oncall, now=at(9, 27, 0, 0, 0))
    verification = services.verify_report(report)

    # then every file renders again to the same bytes, alerts.csv among them, still signed
    assert [(c.name, c.matches) for c in verification.files] == [
        (name, True) for name in sorted(before)
    ]
    assert "alerts.csv" in before
    assert verification.holds


def test_an_alert_of_another_team_never_appears_even_if_the_report_names_its_pipeline():
    # given a report row naming another team's pipeline (the request form refuses that)
    team, pipeline, alerts, _ = team_with_alerts()
    outsider = alerts["outsider"]
    report = Report.objects.create(
        team=team,
        year=2026,
        quarter=3,
        pipeline_ids=sorted([pipeline.pk, outsider.pipeline_id]),
        requested_at=REQUESTED_AT,
        status=ReportStatus.QUEUED,
    )

    # when it is built
    services.build_report(report.pk, REQUESTED_AT)

    # then only this team's alerts are listed
    rows = stored(report, "alerts.csv").decode().splitlines()[1:]
    listed = [int(row.split(",", 1)[0]) for row in rows]
    assert listed == [alerts["handled"].pk, alerts["automatic"].pk, alerts["open"].pk]
