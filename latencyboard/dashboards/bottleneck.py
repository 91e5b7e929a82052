"""A pipeline's bottleneck class: what kind of work its slow requests wait on (pure: stdlib).

Each stage has a *kind* of work, found from its name (:func:`kind_of`): model execution
(compute), fetching features (feature), waiting for a worker (queue), or moving and encoding
bytes (network). A class's share of a cohort of requests is the sum of its stages' shares of
their self time (``rollups.stage_share_queries``: all requests, and the window's slowest 1%:
the requests above its p99, see ``rollups.tails``).

The rule (:func:`classify`), in order:

1. Fewer than :data:`MIN_REQUESTS` requests: *unclassified* (too little data: one slow request
   would decide).
2. The slowest 1% first (only when it holds ``tails.MIN_TAIL_REQUESTS`` requests or more:
   a class is never built on a handful of requests), then all requests: the candidates are
   the four kinds (each the sum
   of its stages) and every stage of no known kind on its own. The leading candidate
   *dominates* when its share is at least :data:`DOMINANT_SHARE` and at least :data:`LEAD`
   above the runner-up. A dominating kind is the class, justified by that cohort's share; a
   dominating stage of no known kind makes the pipeline *unclassified*, naming the stage.
   The tail comes first because the tail is what p99 and an SLA feel: a pipeline whose
   typical request is mostly model time but whose slowest 1% wait in the queue is queue-bound.
3. Nothing dominates in either cohort: *balanced* (no single remedy will do).

Ties never dominate (a lead of 0 is below :data:`LEAD`), so two kinds at 45% each are
balanced. A missing stage is simply a share of 0.

The class's history (one class per bucket) reports a change only on evidence that survives
the noise (:func:`last_change`): a bucket counts when it has :data:`MIN_REQUESTS` requests
or more, and a new class must hold in :data:`CONFIRM_BUCKETS` consecutive counted buckets
and be the window's own class; it changed from the last class that held before it. So the
badge (the window's class) and the change named beside it always agree, and one noisy
bucket never flips the class.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal


class Bottleneck(StrEnum):
    COMPUTE = "compute"
    FEATURE = "feature"
    QUEUE = "queue"
    NETWORK = "network"
    BALANCED = "balanced"
    UNCLASSIFIED = "unclassified"


KINDS: Final = (Bottleneck.COMPUTE, Bottleneck.FEATURE, Bottleneck.QUEUE, Bottleneck.NETWORK)
"""The classes that are a kind of work a stage can do."""

LABELS: Final[Mapping[Bottleneck, str]] = {
    Bottleneck.COMPUTE: "compute-bound",
    Bottleneck.FEATURE: "feature-bound",
    Bottleneck.QUEUE: "queue-bound",
    Bottleneck.NETWORK: "network/serialization-bound",
    Bottleneck.BALANCED: "balanced",
    Bottleneck.UNCLASSIFIED: "unclassified",
}

WORK: Final[Mapping[Bottleneck, str]] = {
    Bottleneck.COMPUTE: "model compute",
    Bottleneck.FEATURE: "feature fetching",
    Bottleneck.QUEUE: "queueing",
    Bottleneck.NETWORK: "network and serialization",
}
"""Each kind of work in words, for sentences."""

REMEDIES: Final[Mapping[Bottleneck, tuple[str, ...]]] = {
    Bottleneck.COMPUTE: (
        "batch requests on the accelerator",
        "quantize or distil the model",
    ),
    Bottleneck.FEATURE: (
        "cache features close to the model",
        "prefetch features before the request needs them",
    ),
    Bottleneck.QUEUE: (
        "autoscale workers on queue depth",
        "admission control: shed or defer load beyond capacity",
    ),
    Bottleneck.NETWORK: (
        "send smaller payloads (fewer fields, ids instead of blobs)",
        "compress, or use a binary encoding",
    ),
    Bottleneck.BALANCED: (),
    Bottleneck.UNCLASSIFIED: (),
}

MIN_REQUESTS: Final = 50
"""Fewer requests than this give no class: the slowest 1% would be a handful of requests."""

CONFIRM_BUCKETS: Final = 2
"""Consecutive buckets with enough data a new class must hold in for a change to be named."""

DOMINANT_SHARE: Final = 0.4
"""A kind dominates a cohort from this share of its self time on (with :data:`LEAD`)."""

LEAD: Final = 0.1
"""How far (in share, 0.1 = 10 points) the leading kind must be above the runner-up."""

DEFAULT_KEYWORDS: Final[Mapping[str, Bottleneck]] = {
    **dict.fromkeys(
        ("model", "forward", "inference", "infer", "predict", "generate", "gpu", "compute"),
        Bottleneck.COMPUTE,
    ),
    **dict.fromkeys(
        ("feature", "features", "hydration", "hydrate", "embedding", "embeddings", "retrieval"),
        Bottleneck.FEATURE,
    ),
    **dict.fromkeys(("queue", "queued", "queueing", "wait", "admission"), Bottleneck.QUEUE),
    **dict.fromkeys(
        (
            "network",
            "serialize",
            "serialization",
            "deserialize",
            "deserialization",
            "marshal",
            "unmarshal",
            "rpc",
            "grpc",
            "transfer",
            "upload",
            "download",
            "payload",
        ),
        Bottleneck.NETWORK,
    ),
}
"""Words of a stage name that give its kind: ``model_forward`` is compute by ``model``."""

Cohort = Literal["tail", "all"]
_COHORT_WORDS: Final[Mapping[Cohort, str]] = {"tail": "the slowest 1%", "all": "all requests"}
_OTHER_COHORT: Final[Mapping[Cohort, Cohort]] = {"tail": "all", "all": "tail"}
_WORD: Final = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Share:
    """One stage's share of the self time of all requests and of the slowest 1% (0 to 1;
    None when the slowest 1% is too few requests to be shown)."""

    stage: str
    share_all: float
    share_tail: float | None


@dataclass(frozen=True, slots=True)
class Classification:
    """A pipeline's class and what justifies it.

    ``stages`` are the class's stages present, largest tail share first; ``share_tail`` and
    ``share_all`` are their summed shares, ``cohort`` the cohort that decided (None for
    balanced and unclassified). ``reason`` says it in a sentence.
    """

    bottleneck: Bottleneck
    requests: int
    stages: tuple[str, ...]
    share_tail: float | None
    share_all: float | None
    cohort: Cohort | None
    reason: str

    @property
    def label(self) -> str:
        return LABELS[self.bottleneck]

    @property
    def remedies(self) -> tuple[str, ...]:
        return REMEDIES[self.bottleneck]

    @property
    def enough_data(self) -> bool:
        return self.requests >= MIN_REQUESTS


@dataclass(frozen=True, slots=True)
class Change:
    """The class changed from ``before`` to ``after`` in the bucket starting ``at``."""

    at: dt.datetime
    before: Bottleneck
    after: Bottleneck

    @property
    def before_label(self) -> str:
        return LABELS[self.before]

    @property
    def after_label(self) -> str:
        return LABELS[self.after]


def parse_stage_kinds(text: str) -> dict[str, Bottleneck]:
    """Stage kinds written ``stage=kind`` separated by commas (``xgb_score=compute,
    profile_lookup=feature``), for stages whose names do not tell their kind. Raises
    ValueError naming the first entry that is not a stage and one of compute, feature,
    queue or network."""
    kinds = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        stage, _, kind = (part.strip() for part in entry.partition("="))
        if not stage or kind not in {k.value for k in KINDS}:
            raise ValueError(
                f"{entry!r} is not stage=kind with a kind of compute, feature, queue or network"
            )
        kinds[stage] = Bottleneck(kind)
    return kinds


def kind_of(
    stage: str,
    names: Mapping[str, Bottleneck] | None = None,
    keywords: Mapping[str, Bottleneck] = DEFAULT_KEYWORDS,
) -> Bottleneck | None:
    """The kind of work of a stage: from ``names`` (exact stage names, for stages named
    otherwise), else from the first word of its name found in ``keywords``; None if neither."""
    if names and stage in names:
        return names[stage]
    for word in _WORD.findall(stage.lower()):
        if word in keywords:
            return keywords[word]
    return None


def classify(
    requests: int,
    stages: Iterable[Share],
    names: Mapping[str, Bottleneck] | None = None,
) -> Classification:
    """Classify a pipeline from its stage shares over ``requests`` requests (see the module
    doc for the rule); ``names`` gives the kind of stages whose names do not tell it."""
    stages = tuple(stages)
    if requests < MIN_REQUESTS:
        return Classification(
            Bottleneck.UNCLASSIFIED,
            requests,
            (),
            None,
            None,
            None,
            f"too little data: {requests} requests, {MIN_REQUESTS} needed",
        )
    kinds = {stage.stage: kind_of(stage.stage, names) for stage in stages}
    tail_shown = all(stage.share_tail is not None for stage in stages)
    cohorts: tuple[Cohort, ...] = ("tail", "all") if tail_shown else ("all",)
    for cohort in cohorts:
        leader = _dominant(stages, kinds, cohort)
        if leader is None:
            continue
        if isinstance(leader, Bottleneck):
            own = sorted(
                (s for s in stages if kinds[s.stage] == leader),
                key=lambda s: (-(s.share_tail or 0.0), -s.share_all, s.stage),
            )
            share_tail = sum(s.share_tail or 0.0 for s in own) if tail_shown else None
            share_all = sum(s.share_all for s in own)
            names_text = " and ".join(s.stage for s in own)
            verb = "is" if len(own) == 1 else "are"
            shares = {"tail": share_tail, "all": share_all}
            other = _OTHER_COHORT[cohort]
            other_share = shares[other]
            reason = (
                f"{names_text} {verb} {_percent(shares[cohort] or 0.0)} of "
                f"{_COHORT_WORDS[cohort]} "
                + (
                    f"({_percent(other_share)} of {_COHORT_WORDS[other]})"
                    if other_share is not None
                    else "(too few requests for a slowest 1%)"
                )
            )
            return Classification(
                leader,
                requests,
                tuple(s.stage for s in own),
                share_tail,
                share_all,
                cohort,
                reason,
            )
        share = next(getattr(s, f"share_{cohort}") or 0.0 for s in stages if s.stage == leader)
        return Classification(
            Bottleneck.UNCLASSIFIED,
            requests,
            (),
            None,
            None,
            None,
            f"{leader} is {_percent(share)} of {_COHORT_WORDS[cohort]} and is not a model, "
            "feature, queue or network stage",
        )
    first = cohorts[0]
    largest = max(_candidates(stages, kinds, first).items(), key=lambda item: item[1], default=None)
    reason = (
        f"no kind of work is {_percent(DOMINANT_SHARE)} or more of "
        + " or of ".join(_COHORT_WORDS[c] for c in cohorts)
        + f" and {LEAD * 100:.0f} points ahead of the next"
    )
    if largest is not None:
        name = WORK[largest[0]] if isinstance(largest[0], Bottleneck) else largest[0]
        reason += f"; the largest in {_COHORT_WORDS[first]} is {name} at {_percent(largest[1])}"
    return Classification(Bottleneck.BALANCED, requests, (), None, None, None, reason)


def last_change(
    history: Sequence[tuple[dt.datetime, Classification]], current: Bottleneck
) -> Change | None:
    """The latest change of class in ``history`` (in time order) to ``current`` (the class
    of the whole window), by the rule of the module doc: buckets with too little data are
    skipped, and a class counts once it holds in :data:`CONFIRM_BUCKETS` consecutive
    buckets. The change is from the last class that held before, at the first bucket of
    ``current`` since then. None when no such change happened (a class that never held is
    noise, not a class to change from)."""
    known = [(at, c.bottleneck) for at, c in history if c.enough_data]
    runs: list[int] = []  # where each run that held starts, in ``known``
    run_start = 0
    for index, (_, bottleneck) in enumerate(known):
        if index and bottleneck != known[index - 1][1]:
            run_start = index
        if index - run_start + 1 == CONFIRM_BUCKETS:
            runs.append(run_start)
    if not runs or known[runs[-1]][1] != current:
        return None
    since = runs[-1]
    for start in reversed(runs[:-1]):
        if known[start][1] != current:
            return Change(known[since][0], known[start][1], current)
        since = start
    return None


def _candidates(
    stages: Sequence[Share], kinds: Mapping[str, Bottleneck | None], cohort: Cohort
) -> dict[Bottleneck | str, float]:
    """Each kind's summed share and each stage of no kind's own share, in ``cohort``."""
    totals: dict[Bottleneck | str, float] = {}
    for stage in stages:
        key: Bottleneck | str = kinds[stage.stage] or stage.stage
        totals[key] = totals.get(key, 0.0) + (getattr(stage, f"share_{cohort}") or 0.0)
    return totals


def _dominant(
    stages: Sequence[Share], kinds: Mapping[str, Bottleneck | None], cohort: Cohort
) -> Bottleneck | str | None:
    """The kind (or stage of no kind) that dominates ``cohort``, if any."""
    ranked = sorted(_candidates(stages, kinds, cohort).items(), key=lambda item: -item[1])
    if not ranked:
        return None
    leader, share = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    # Shares are sums of floats: compare with a hair of slack so that 0.5 - 0.4 counts as 0.1.
    if share >= DOMINANT_SHARE - 1e-9 and share - runner_up >= LEAD - 1e-9:
        return leader
    return None


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"
