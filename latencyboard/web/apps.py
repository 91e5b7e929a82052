"""The Django admin, served by the site that writes its changes to the audit log."""

from django.contrib.admin.apps import AdminConfig


class AuditedAdminConfig(AdminConfig):
    default_site = "latencyboard.web.admin_audit.AuditedAdminSite"
