from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from latencyboard.web import api_docs, views

# Redoc (served from here by drf-spectacular-sidecar) runs its search in a blob: worker.
_REDOC_CSP = {"worker-src": ["blob:"]}

handler500 = "latencyboard.web.errors.server_error"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("ingest.urls")),
    path("", include("latencyboard.dashboards.page_urls")),
    path("", include("latencyboard.pipelines.page_urls")),
    path("traces/", include("latencyboard.traces.page_urls")),
    path("slas/", include("latencyboard.sla.page_urls")),
    path("compare/", include("latencyboard.compare.page_urls")),
    path("alerts/", include("latencyboard.alerts.urls")),
    path("audits/", include("audits.urls")),
    path("account/api-tokens/", include("latencyboard.apitokens.urls")),
    path("api/", include("latencyboard.api_urls")),
    path("api/", include("audits.api_urls")),
    path("prometheus/api/v1/", include("latencyboard.prometheus.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        csp_update(_REDOC_CSP)(
            SpectacularRedocView.as_view(url_name="api-schema", template_name="api/docs.html")
        ),
        name="api-docs",
    ),
    path("api/docs/redoc.standalone.js", api_docs.redoc_bundle, name="api-docs-redoc"),
]
