"""``python -m tests.ingest.genai_client LIBRARY BASE_URL``: an application calling an
OpenAI-compatible server through the ``openai`` client, instrumented by one of the real GenAI
instrumentation libraries, exporting through the SDK's OTLP/HTTP exporter as configured by the
standard ``OTEL_*`` environment variables. It makes one plain and one streamed chat completion.

A process of its own per library: each instrumentation patches the ``openai`` client
globally, and their dependency pins may disagree.
"""

from __future__ import annotations

import sys

from openai import OpenAI
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

LIBRARIES = ("openai-v2", "openinference", "traceloop")


def _instrument(library: str, provider: TracerProvider) -> None:
    if library == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif library == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        OpenInference().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Traceloop

        Traceloop().instrument(tracer_provider=provider)


def main(library: str, base_url: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": f"chat-{library}"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    _instrument(library, provider)
    client = OpenAI(base_url=base_url, api_key="test", timeout=30, max_retries=0)
    question = "Where does the time go?"
    client.chat.completions.create(
        model="tiny-llm-1", messages=[{"role": "user", "content": question}]
    )
    stream = client.chat.completions.create(
        model="tiny-llm-1",
        messages=[{"role": "user", "content": question}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for _ in stream:
        pass
    provider.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:3])
