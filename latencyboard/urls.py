from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from latencyboard.web import views

# Redoc searches in a blob: worker and uses Google's fonts; its script comes from jsDelivr
# until drf-spectacular-sidecar serves it from here (then only the CDN entry goes).
_REDOC_CSP = {
    "script-src": ["https://cdn.jsdelivr.net"],
    "style-src": ["https://fonts.googleapis.com"],
    "font-src": ["https://fonts.gstatic.com"],
    "worker-src": ["blob:"],
}

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("ingest.urls")),
    path("", include("latencyboard.dashboards.urls")),
    path("traces/", include("latencyboard.traces.urls")),
    path("slas/", include("latencyboard.sla.page_urls")),
    path("compare/", include("latencyboard.compare.urls")),
    path("account/api-tokens/", include("latencyboard.apitokens.urls")),
    path("api/", include("latencyboard.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        csp_update(_REDOC_CSP)(SpectacularRedocView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
]

urlpatterns += staticfiles_urlpatterns()
