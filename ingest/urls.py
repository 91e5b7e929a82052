from django.urls import path

from ingest import views

urlpatterns = [path("v1/traces", views.traces, name="otlp-traces")]
