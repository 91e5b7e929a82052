from django.apps import AppConfig


class ApiTokensConfig(AppConfig):
    name = "latencyboard.apitokens"
    label = "apitokens"
    verbose_name = "API tokens"

    def ready(self) -> None:
        # Registers the bearer scheme with drf-spectacular.
        from latencyboard.apitokens import schema  # noqa: F401
