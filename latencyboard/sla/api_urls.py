"""SLA API routes, included under ``/api/``."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from latencyboard.sla.api import ObjectiveViewSet

# SimpleRouter: no API root view of its own to clash with other apps' routes under /api/.
router = SimpleRouter()
router.register("slas", ObjectiveViewSet, basename="sla")

urlpatterns = router.urls
