from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "audits"
    verbose_name = "Audits"

    def ready(self) -> None:
        from audits.log import on_acted
        from latencyboard.audit_trail import acted

        acted.connect(on_acted, dispatch_uid="audits.log.on_acted")
