"""Version segments and the deployment markers they imply (pure: stdlib only).

A deployment shows in traces as a change of ``service.version`` or ``model.version``, both
cohort attributes: the cohort rollups hold a row per value and bucket it was seen in, so a
value's first minute in them is where it appeared. Those buckets, read as
:class:`Sighting` (:func:`sightings_of_buckets`), make *segments*: stretches of time during
which one value of one version attribute was seen without a gap longer than :data:`GAP`. A
canary, a full rollout and a rollback each start or end a segment. Older parts of a window
are read from hour and day rows (finer ones expire), so their markers fall on the hour or day.

Markers are derived from segments:

- a version *appeared* where a segment starts and the attribute last had another value (the
  very first segment is where the data starts, not a deployment);
- a version is *gone* where a segment ends while another value of the attribute was still
  seen more than :data:`GAP` later (not merely because traffic stopped).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from latencyboard.windows import MINUTE

VERSION_ATTRIBUTES: Final = ("service.version", "model.version")
"""Span attributes whose changes mark a deployment."""

GAP: Final = dt.timedelta(minutes=15)
"""A value unseen for longer than this ends its segment: long enough for a 5% canary on a
quiet pipeline to stay one segment, short enough to see a rollback within the hour."""


@dataclass(frozen=True, slots=True)
class Sighting:
    """Spans of one pipeline carrying ``attribute`` = ``value`` between ``first`` and
    ``last`` (their start times): what one scan reads per minute."""

    attribute: str
    value: str
    first: dt.datetime
    last: dt.datetime
    spans: int


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of time in which ``attribute`` = ``value`` was seen with no gap over
    :data:`GAP`; ``id`` is the stored row's, None for a segment not stored yet."""

    id: int | None
    attribute: str
    value: str
    first_seen: dt.datetime
    last_seen: dt.datetime
    spans: int


@dataclass(frozen=True, slots=True)
class Marker:
    """A deployment at ``at``: ``value`` of ``attribute`` appeared (``previous`` is the value
    seen last before it) or is gone."""

    at: dt.datetime
    attribute: str
    value: str
    kind: Literal["appeared", "gone"]
    previous: str | None


def sightings_of_buckets(
    rows: Iterable[tuple[str, str, dt.datetime, int, int]],
) -> list[Sighting]:
    """Sightings from cohort rollup buckets ``(attribute, value, bucket_start, bucket
    seconds, spans)``: seen from the bucket's first minute to its last."""
    return [
        Sighting(attribute, value, start, start + dt.timedelta(seconds=seconds) - MINUTE, spans)
        for attribute, value, start, seconds, spans in rows
    ]


def extend_segments(
    latest: Mapping[tuple[str, str], Segment], sightings: Iterable[Sighting]
) -> list[Segment]:
    """The segments that change when ``sightings`` are added to the stored ones.

    ``latest`` holds the most recent stored segment of each (attribute, value). A sighting
    within :data:`GAP` of its value's segment extends it (same ``id``); a later one starts a
    new segment (``id`` None). Sightings may come in any order but must all be later than
    what ``latest`` covers, as a scan past a watermark reads them. Returns each changed or new
    segment once, oldest first per value.
    """
    current = dict(latest)
    changed: dict[tuple[str, str], list[Segment]] = {}
    for sighting in sorted(sightings, key=lambda s: (s.attribute, s.value, s.first)):
        key = (sighting.attribute, sighting.value)
        segment = current.get(key)
        touched = changed.setdefault(key, [])
        if segment is None or sighting.first - segment.last_seen > GAP:
            segment = Segment(
                None, sighting.attribute, sighting.value, sighting.first, sighting.last, 0
            )
            touched.append(segment)
        elif not touched:
            touched.append(segment)
        segment = replace(
            segment,
            first_seen=min(segment.first_seen, sighting.first),
            last_seen=max(segment.last_seen, sighting.last),
            spans=segment.spans + sighting.spans,
        )
        touched[-1] = current[key] = segment
    return [segment for segments in changed.values() for segment in segments]


def markers(segments: Sequence[Segment], start: dt.datetime, end: dt.datetime) -> list[Marker]:
    """The deployments within ``[start, end)`` that ``segments`` (all of a pipeline's, or at
    least all that end after ``start``) imply, by time.

    A segment marks an appearance only when the value seen last before it differs from its
    own: traffic resuming on the same version after a pause is no deployment.
    """
    found = []
    for attribute in sorted({segment.attribute for segment in segments}):
        of_attribute = sorted(
            (s for s in segments if s.attribute == attribute), key=lambda s: s.first_seen
        )
        for segment in of_attribute:
            earlier = [s for s in of_attribute if s.first_seen < segment.first_seen]
            previous = max(earlier, key=lambda s: s.last_seen).value if earlier else None
            if previous not in (None, segment.value) and start <= segment.first_seen < end:
                found.append(
                    Marker(segment.first_seen, attribute, segment.value, "appeared", previous)
                )
            outlived = any(
                s.last_seen - segment.last_seen > GAP
                for s in of_attribute
                if s.value != segment.value
            )
            if outlived and start <= segment.last_seen < end:
                found.append(Marker(segment.last_seen, attribute, segment.value, "gone", None))
    return sorted(found, key=lambda marker: (marker.at, marker.attribute, marker.kind))
