from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "latencyboard.retention"
    default_auto_field = "django.db.models.BigAutoField"
