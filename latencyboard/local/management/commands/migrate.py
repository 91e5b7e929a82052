"""``manage.py migrate``, run as the owner role when ``DATABASE_MIGRATION_URL`` names one.

The migrations then connect as the owner, and afterwards the owner hands the application
role (``DATABASE_URL``'s user, created if missing) everything but the audit log
(``latencyboard.storage.roles``). Without ``DATABASE_MIGRATION_URL`` the application's own
role migrates, as a single-role database always did.
"""

from __future__ import annotations

from typing import Any

import dj_database_url
from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import DEFAULT_DB_ALIAS, connections

from latencyboard.storage import roles

_CREDENTIALS = ("HOST", "PORT", "NAME", "USER", "PASSWORD")


class Command(DjangoMigrate):
    def execute(self, *args: Any, **options: Any) -> str | None:
        # execute, not handle: the system checks before handle query the database too, and
        # the application role may not exist yet.
        owner_url = settings.DATABASE_MIGRATION_URL
        if not owner_url or options.get("database", DEFAULT_DB_ALIAS) != DEFAULT_DB_ALIAS:
            return super().execute(*args, **options)
        connection = connections[DEFAULT_DB_ALIAS]
        app = {key: connection.settings_dict[key] for key in _CREDENTIALS}
        owner: dict[str, Any] = dict(dj_database_url.parse(owner_url))
        connection.close()
        connection.settings_dict.update({key: owner[key] for key in _CREDENTIALS})
        try:
            output = super().execute(*args, **options)
            with connection.cursor() as cursor:
                roles.ensure_role(cursor.cursor, app["USER"], app["PASSWORD"] or None)
                roles.hand_over(cursor.cursor, app["USER"])
            return output
        except roles.SuperuserRoleError as exc:
            raise CommandError(f"{exc}: give DATABASE_URL a role of its own") from exc
        finally:
            connection.close()
            connection.settings_dict.update(app)
