from django.urls import path, re_path

from latencyboard.live.consumers import LiveConsumer, UnknownPathConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi()),
    # Any other path is refused at the handshake: without this route Channels raises
    # "No route found", which the server answers with a 500 and logs as an error.
    re_path(r"", UnknownPathConsumer.as_asgi()),
]
