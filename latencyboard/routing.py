from django.urls import path

from latencyboard.live.consumers import OverviewConsumer, PipelineConsumer

websocket_urlpatterns = [
    path("ws/live/", OverviewConsumer.as_asgi()),
    path("ws/live/pipelines/<int:pipeline_id>/", PipelineConsumer.as_asgi()),
]
