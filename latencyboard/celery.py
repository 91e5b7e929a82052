"""The Celery app: ``celery -A latencyboard worker`` / ``celery -A latencyboard beat``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latencyboard.settings")

app = Celery("latencyboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
