"""Which live groups a user may join: the access rule of the pages, applied to sockets."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User

from latencyboard.live.groups import pipeline_group, team_group
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.queries import teams_of


def overview_groups(user: User | AnonymousUser) -> list[str]:
    """The groups of every team of ``user``."""
    return [team_group(pk) for pk in teams_of(user).values_list("pk", flat=True)]


def pipeline_groups(user: User | AnonymousUser, pipeline_id: int) -> list[str] | None:
    """The group of the pipeline, or None when it is not in one of ``user``'s teams."""
    if not Pipeline.objects.visible_to(user).filter(pk=pipeline_id).exists():
        return None
    return [pipeline_group(pipeline_id)]
