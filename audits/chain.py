"""The audit log's hash chain (pure: no Django).

Each event has a sequence number (1, 2, 3… with no gap) and a hash: the SHA-256 of the hash
before it (:data:`GENESIS` for the first) and a canonical encoding of its own fields and
number. An edited row no longer matches its hash; a deleted one leaves a gap; a row inserted
later, even with a well-computed hash, can only be appended, so one dated earlier than the row
before it (or than a checkpoint it follows) is back-dated. A checkpoint is a chain head that a
signed report carries: rewriting the whole chain changes the hash at its sequence number.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

GENESIS: Final = "0" * 64
FIELDS: Final = (
    "at",
    "team_id",
    "actor_id",
    "actor_username",
    "action",
    "subject_type",
    "subject_id",
    "subject_label",
    "detail",
    "ip",
    "user_agent",
)
"""The fields of an event that its hash covers, with ``seq``: all of them but the database id."""

OUT_OF_ORDER: Final = dt.timedelta(minutes=1)
"""How much earlier than the row before it an event may be dated: an event's moment is read
just before its append waits its turn, so concurrent appends may finish slightly out of order."""


def _plain(value: object) -> object:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    return value


def row_hash(previous: str, seq: int, row: Mapping[str, object]) -> str:
    """The hash of the event ``row`` (its :data:`FIELDS`, as the database returns them) at
    ``seq``, following the event whose hash is ``previous``."""
    fields = {name: _plain(row[name]) for name in FIELDS}
    canonical = json.dumps(
        {"seq": seq, "fields": fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return hashlib.sha256(f"{previous}\n{canonical}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Head:
    """The last event of the chain: its sequence number and hash (0 and GENESIS: none)."""

    seq: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A chain head a signed report carries, with the moment it was read (its ``as_of``)."""

    head: Head
    at: dt.datetime
    source: str


@dataclass(frozen=True, slots=True)
class Row:
    """An event as stored: its id, sequence number, hash and :data:`FIELDS`."""

    id: int
    seq: int
    sha256: str
    fields: Mapping[str, object]

    @property
    def at(self) -> dt.datetime:
        at = self.fields["at"]
        assert isinstance(at, dt.datetime)
        return at


@dataclass(frozen=True, slots=True)
class Break:
    """The first row the chain does not vouch for (``seq`` of the row, or past the end)."""

    seq: int
    id: int | None
    reason: str

    def __str__(self) -> str:
        row = "past the end" if self.id is None else f"id {self.id}"
        return f"seq {self.seq} ({row}): {self.reason}"


@dataclass(frozen=True, slots=True)
class Verdict:
    head: Head
    events: int
    broken: Break | None


def verify(rows: Iterable[Row], checkpoints: Sequence[Checkpoint] = ()) -> Verdict:
    """Walk ``rows`` in sequence order and say where the chain first fails, if it does: a
    gap (deleted rows), a row that does not match its hash (edited or forged), a row dated
    more than :data:`OUT_OF_ORDER` before the row before it or before a checkpoint it
    follows (inserted later, back-dated), a hash that is not a checkpoint's, or a checkpoint
    past the end (the tail was cut off)."""
    at_seq = {c.head.seq: c for c in checkpoints}
    head, events = Head(0, GENESIS), 0
    floor: tuple[dt.datetime, str] | None = None  # no row may be dated earlier, and why
    for row in rows:
        broken = _break(row, head, floor, at_seq.get(row.seq))
        if broken is not None:
            return Verdict(head, events, broken)
        head, events = Head(row.seq, row.sha256), events + 1
        floor = max(
            [(row.at, f"seq {row.seq}")]
            + ([] if floor is None else [floor])
            + ([(c.at, c.source)] if (c := at_seq.get(row.seq)) else [])
        )
    beyond = [c for c in checkpoints if c.head.seq > head.seq]
    if beyond:
        cut = min(beyond, key=lambda c: c.head.seq)
        reason = f"missing: the log ends at seq {head.seq}, {cut.source} saw seq {cut.head.seq}"
        return Verdict(head, events, Break(head.seq + 1, None, reason))
    return Verdict(head, events, None)


def _break(
    row: Row, head: Head, floor: tuple[dt.datetime, str] | None, checkpoint: Checkpoint | None
) -> Break | None:
    def broken(reason: str) -> Break:
        return Break(row.seq, row.id, reason)

    if row.seq != head.seq + 1:
        return broken(f"follows seq {head.seq}: the rows between are missing (deleted)")
    if row_hash(head.sha256, row.seq, row.fields) != row.sha256:
        return broken("does not match its hash (edited, or not chained to the row before)")
    if floor is not None and row.at < floor[0] - OUT_OF_ORDER:
        return broken(f"dated {_plain(row.at)}, before {floor[1]} ({_plain(floor[0])}): back-dated")
    if checkpoint is not None and checkpoint.head.sha256 != row.sha256:
        return broken(f"its hash is not the one {checkpoint.source} signed (rewritten)")
    return None
