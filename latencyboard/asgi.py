"""ASGI entry point: Django for HTTP, Channels for WebSockets."""

import os

from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latencyboard.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

from latencyboard.db import bound_statements, pool_connections  # noqa: E402
from latencyboard.processes import (  # noqa: E402
    hand_back_the_gil_soon,
    keep_loaded_objects_out_of_the_collector,
)

bound_statements(settings.WEB_STATEMENT_TIMEOUT_SECONDS)
pool_connections(settings.WEB_DB_POOL_SIZE, settings.WEB_DB_POOL_WAIT_SECONDS)
# Each request runs on a thread of its own: a page's queries must not each wait 5 ms for the
# GIL behind another team's long read in the same process.
hand_back_the_gil_soon()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from latencyboard.live.origin import SameOriginSockets  # noqa: E402
from latencyboard.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            SameOriginSockets(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# Load the URLconf now, then keep all that is loaded out of the collector's full walks, which
# stopped every request of the process for 100-150 ms each.
get_resolver().url_patterns  # noqa: B018 - loading it is the point
keep_loaded_objects_out_of_the_collector()
