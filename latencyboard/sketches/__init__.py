"""Mergeable latency sketches: bucket mapping, the sketch, its binary format, batch decoding
of many blobs at once, and the exact sums they carry. Pure computation, no Django."""
