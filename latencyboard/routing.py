from django.urls import path, re_path

from latencyboard.live.consumers import OverviewConsumer, PipelineConsumer, UnknownPathConsumer

websocket_urlpatterns = [
    path("ws/live/", OverviewConsumer.as_asgi()),
    path("ws/live/pipelines/<int:pipeline_id>/", PipelineConsumer.as_asgi()),
    # Any other path is refused at the handshake: without this route Channels raises
    # "No route found", which the server answers with a 500 and logs as an error.
    re_path(r"", UnknownPathConsumer.as_asgi()),
]
