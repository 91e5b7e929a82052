"""Demo inference pipelines: realistic traffic profiles and an OTLP traffic generator."""
