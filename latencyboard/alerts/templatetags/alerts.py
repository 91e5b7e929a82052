"""``{% open_alerts_block %}``: the overview's small block of open alerts of the user's teams."""

from __future__ import annotations

from typing import Any

from django import template

from latencyboard.alerts.queries import open_alerts

register = template.Library()

SHOWN = 5


@register.inclusion_tag("alerts/_overview_block.html", takes_context=True)
def open_alerts_block(context: dict[str, Any]) -> dict[str, Any]:
    alerts = open_alerts(context["request"].user)
    return {"alerts": alerts[:SHOWN], "count": alerts.count()}
