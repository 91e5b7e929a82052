from channels.security.websocket import WebsocketDenier
from django.urls import path, re_path

from latencyboard.live.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi()),
    # Any other path is refused at the handshake (HTTP 403): without this route Channels
    # raises "No route found", which the server answers with a 500 and logs as an error.
    re_path(r"", WebsocketDenier.as_asgi()),
]
