from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from rest_framework import serializers

from latencyboard.alerts.channels import check_channel
from latencyboard.alerts.models import (
    RULE_SETTINGS,
    Alert,
    AlertEvent,
    Channel,
    Delivery,
    Incident,
    Rule,
)
from latencyboard.notifications import registry
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Role


class AlertEventSerializer(serializers.ModelSerializer[AlertEvent]):
    who = serializers.SlugRelatedField[User](slug_field="username", read_only=True)

    class Meta:
        model = AlertEvent
        fields = ["from_status", "to_status", "who", "at", "note"]


class DeliverySerializer(serializers.ModelSerializer[Delivery]):
    """``detail`` (the receiver's answer, which may echo the target's secret path) is shown
    to admins of the channel's team only (``admin_team_ids`` in the context), as targets are."""

    channel = serializers.CharField(source="channel.name", read_only=True)
    action = serializers.SerializerMethodField()

    class Meta:
        model = Delivery
        fields = [
            "id",
            "channel",
            "action",
            "status",
            "attempts",
            "queued_at",
            "last_status_code",
            "detail",
        ]

    def to_representation(self, instance: Delivery) -> dict[str, Any]:
        shown: dict[str, Any] = super().to_representation(instance)
        if instance.channel.team_id not in self.context.get("admin_team_ids", ()):
            shown["detail"] = ""
        return shown

    def get_action(self, delivery: Delivery) -> str:
        """The transition told (``firing``…), or ``test`` for a channel's "send test"."""
        return delivery.event.to_status if delivery.event else "test"


class AlertSerializer(serializers.ModelSerializer[Alert]):
    """``evidence`` holds the figures at firing, ``current`` those of the latest evaluation
    while the alert was open (at ``current_at``); ``incident`` is the id of its incident.
    A regression's figures carry ``change_interval``: bounds for the change in ms and in
    percent of the baseline, at ``confidence`` simultaneous over the quantiles ``over``, the
    interval compare quotes (absent from evidence stored before it was kept)."""

    pipeline = serializers.CharField(source="pipeline.__str__", read_only=True)
    pipeline_id = serializers.IntegerField(read_only=True)
    stage = serializers.CharField(source="stage_name", read_only=True)
    rule = serializers.CharField(source="rule.name", read_only=True)
    severity = serializers.CharField(read_only=True)

    class Meta:
        model = Alert
        fields = [
            "id",
            "rule",
            "rule_id",
            "pipeline",
            "pipeline_id",
            "stage",
            "severity",
            "status",
            "summary",
            "dedup_key",
            "started_at",
            "resolved_at",
            "incident",
            "evidence",
            "current",
            "current_at",
        ]


class IncidentSerializer(serializers.ModelSerializer[Incident]):
    """An incident: alerts of one pipeline overlapping in time, named after the stage that
    grew most; ``alerts`` are its member alerts' ids, oldest first."""

    pipeline = serializers.CharField(source="pipeline.__str__", read_only=True)
    pipeline_id = serializers.IntegerField(read_only=True)
    state = serializers.CharField(source="status", read_only=True)
    alerts = serializers.SerializerMethodField()

    class Meta:
        model = Incident
        fields = [
            "id",
            "pipeline",
            "pipeline_id",
            "state",
            "title",
            "dedup_key",
            "opened_at",
            "resolved_at",
            "alerts",
        ]

    def get_alerts(self, incident: Incident) -> list[int]:
        return sorted(alert.pk for alert in incident.alerts.all())


class AlertDetailSerializer(AlertSerializer):
    events = AlertEventSerializer(many=True, read_only=True)
    deliveries = serializers.SerializerMethodField()

    class Meta(AlertSerializer.Meta):
        fields = [*AlertSerializer.Meta.fields, "events", "deliveries"]

    def get_deliveries(self, alert: Alert) -> list[dict[str, Any]]:
        rows = Delivery.objects.filter(event__alert=alert).select_related("channel", "event")
        return DeliverySerializer(rows, many=True, context=self.context).data  # type: ignore[return-value]


class NoteSerializer(serializers.Serializer[Any]):
    """What acknowledging or resolving by hand says (optional)."""

    note = serializers.CharField(max_length=400, required=False, default="", allow_blank=True)


class ChannelSerializer(serializers.ModelSerializer[Channel]):
    """The secret is write-only: reads show ``secret_hint`` (masked), and a Slack target
    (itself a secret) masked; members who are not the team's admins see every URL masked.
    Left empty, the stored secret stays; a new webhook channel without one gets a generated
    signing key, which the answer that made it carries once (``secret``)."""

    generated_secret = ""

    secret = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=500
    )
    secret_hint = serializers.CharField(read_only=True)

    class Meta:
        model = Channel
        fields = ["id", "team", "name", "kind", "target", "secret", "secret_hint", "enabled"]

    def get_fields(self) -> dict[str, Any]:
        # Teams the user does not administer answer as if they did not exist.
        fields = super().get_fields()
        fields["team"].queryset = self.context["admin_teams"]  # type: ignore[attr-defined]
        # The kinds registered now, not when this module was imported.
        fields["kind"] = serializers.ChoiceField(choices=registry.choices())
        return fields

    def to_representation(self, instance: Channel) -> dict[str, Any]:
        shown: dict[str, Any] = super().to_representation(instance)
        admin = instance.team_id in self.context["admin_team_ids"]
        shown["target"] = instance.target_hint if admin else instance.target_masked
        if self.generated_secret and self.generated_secret == instance.secret:
            shown["secret"] = instance.secret
        return shown

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs.get("kind", self.instance.kind if self.instance else "")
        target = attrs.get("target", self.instance.target if self.instance else "")
        checked = check_channel(kind, target, attrs.get("secret", ""), self.instance)
        if checked.errors:
            raise serializers.ValidationError(checked.errors)
        attrs["secret"] = checked.secret
        if checked.generated:
            self.generated_secret = checked.secret
        return attrs


class RuleSerializer(serializers.ModelSerializer[Rule]):
    class Meta:
        model = Rule
        fields = ["id", *RULE_SETTINGS]
        extra_kwargs = {
            "stages": {"required": False},
            "channels": {"required": False},
        }

    def get_fields(self) -> dict[str, Any]:
        # Pipelines, stages and channels of teams the user does not administer answer as if
        # they did not exist.
        fields = super().get_fields()
        user = self.context["request"].user
        stages, channels = fields["stages"], fields["channels"]
        fields["pipeline"].queryset = Pipeline.objects.visible_to(user, Role.ADMIN)  # type: ignore[attr-defined]
        stages.child_relation.queryset = Stage.objects.visible_to(user, Role.ADMIN)  # type: ignore[attr-defined]
        channels.child_relation.queryset = Channel.objects.visible_to(user, Role.ADMIN)  # type: ignore[attr-defined]
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        pipeline: Pipeline | None = attrs.get("pipeline") or (
            self.instance.pipeline if self.instance else None
        )
        if pipeline is None:
            raise serializers.ValidationError({"pipeline": "This field is required."})
        stages: list[Stage] = attrs.get("stages", [])
        if any(stage.pipeline_id != pipeline.pk for stage in stages):
            raise serializers.ValidationError({"stages": "Stages of another pipeline."})
        channels: list[Channel] = attrs.get("channels", [])
        if any(channel.team_id != pipeline.team_id for channel in channels):
            raise serializers.ValidationError({"channels": "Channels of another team."})
        if not (attrs.get("regression", True) or attrs.get("burn_rate", False)):
            raise serializers.ValidationError({"regression": "Enable at least one detector."})
        return attrs


class ReplayedAlertSerializer(serializers.Serializer[Any]):
    stage = serializers.CharField()
    fired_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True, help_text="Null: still open.")
    quantile = serializers.CharField()
    baseline_ms = serializers.FloatField()
    current_ms = serializers.FloatField()
    effect_pct = serializers.FloatField()
    p_value = serializers.FloatField()


class RulePreviewSerializer(serializers.Serializer[Any]):
    """The alerts a rule would have raised, evaluated every minute from ``first`` to
    ``last``; ``pages``: the incidents they form (each paged once)."""

    first = serializers.DateTimeField()
    last = serializers.DateTimeField()
    evaluations = serializers.IntegerField()
    detector_runs = serializers.IntegerField()
    pages = serializers.IntegerField()
    alerts = ReplayedAlertSerializer(many=True)


class ReachSerializer(serializers.Serializer[Any]):
    """What a rule finds in one stage at the last hour's traffic (see alerts.reach)."""

    per_minute = serializers.FloatField(help_text="Requests a minute over the last hour.")
    window_n = serializers.IntegerField(help_text="Requests in the rule's window at that rate.")
    detectable_percent = serializers.FloatField(
        allow_null=True,
        help_text="The smallest slowdown of the whole stage (percent) found within the window "
        "with 80% probability; null when even +300% is not.",
    )
    test = serializers.CharField(
        allow_null=True, help_text="The test that finds it: p90/p95/p99 counts, p50 the rank test."
    )
    target_minutes = serializers.IntegerField(
        allow_null=True,
        help_text="The window in which +25% is found with 80% probability; null beyond a day.",
    )


class StageReachSerializer(serializers.Serializer[Any]):
    """One watched stage; ``reach`` is null while its baseline is not ready."""

    stage = serializers.CharField()
    reach = ReachSerializer(allow_null=True)
