"""Realistic traffic profiles for the demo inference pipelines (pure: numpy + stdlib).

Three pipelines (``fraud-scorer``, ``recommender``, ``clinical-alerts``, their figures in
``pipelines.toml``) run the same six stages in order, as sequential children of one root SERVER
span. Stage durations are log-normal with a small
Pareto tail component mixed in, ``feature_hydration`` is much slower on a cache miss, a candidate
model version is slower in ``model_forward``, and about 1% of requests fail in some stage.

Everything is sampled in bulk with numpy (:func:`sample_requests`), so the live demo and a bulk
historical backfill draw from the same distributions. :func:`diurnal_factor` and
:func:`candidate_share_at` are pure functions of wall-clock time, so backfilled history and live
traffic agree on the daily traffic shape and on which model version is rolled out when.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from latencyboard.windows import DAY

QUEUE_WAIT = "queue_wait"
FEATURE_HYDRATION = "feature_hydration"
PREPROCESS = "preprocess"
MODEL_FORWARD = "model_forward"
POSTPROCESS = "postprocess"
SERIALIZE = "serialize"
STAGE_NAMES: tuple[str, ...] = (
    QUEUE_WAIT,
    FEATURE_HYDRATION,
    PREPROCESS,
    MODEL_FORWARD,
    POSTPROCESS,
    SERIALIZE,
)
HYDRATION_INDEX = STAGE_NAMES.index(FEATURE_HYDRATION)
FORWARD_INDEX = STAGE_NAMES.index(MODEL_FORWARD)

ENVIRONMENT = "production"

# Candidate-model rollout, as (start of step as a fraction of the rollout period, share of
# traffic on the candidate from then on): baseline only, 5% canary, 50%, 100%; the period wrapping
# around is the rollback to the baseline. Every step is a deployment worth marking.
ROLLOUT_STEPS: tuple[tuple[float, float], ...] = ((0.55, 0.05), (0.60, 0.5), (0.70, 1.0))

_NS_PER_MS = 1_000_000
_DAY_S = DAY.total_seconds()

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LatencyDist:
    """A log-normal body with a Pareto tail component mixed in.

    ``median_ms``/``sigma`` describe the body (``sigma`` is the standard deviation of the log).
    With probability ``tail_prob`` a sample comes instead from a Pareto distribution with scale
    ``tail_scale * median_ms`` and shape ``tail_alpha`` (smaller is heavier; below 2 the variance
    is infinite, as for GC pauses, retries and noisy neighbours). Samples are capped at
    ``cap_ms`` because the server's deadline bounds how long anything can run.
    """

    median_ms: float
    sigma: float
    tail_prob: float = 0.01
    tail_scale: float = 4.0
    tail_alpha: float = 1.7
    cap_ms: float = 5_000.0

    def sample_ns(self, n: int, rng: np.random.Generator) -> FloatArray:
        """``n`` durations in nanoseconds (float64; callers round once after combining)."""
        median_ns = self.median_ms * _NS_PER_MS
        out = median_ns * np.exp(self.sigma * rng.standard_normal(n))
        if self.tail_prob > 0:
            tail = rng.random(n) < self.tail_prob
            # numpy's pareto() is the Lomax form (support from 0), hence the +1.
            out[tail] = (
                median_ns * self.tail_scale * (1.0 + rng.pareto(self.tail_alpha, tail.sum()))
            )
        return np.minimum(out, self.cap_ms * _NS_PER_MS, out=out)


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage and how it fails.

    ``cache_miss`` (``feature_hydration`` only) replaces ``latency`` when the feature cache misses.
    ``error_weight`` is the stage's relative share of failing requests; ``error_type`` and
    ``error_http_status`` describe the failure as the client sees it.
    """

    name: str
    latency: LatencyDist
    cache_miss: LatencyDist | None = None
    error_weight: float = 0.0
    error_type: str = ""
    error_http_status: int = 500


@dataclass(frozen=True, slots=True)
class ModelVersion:
    """A model artifact; ``forward_factor`` scales ``model_forward`` durations."""

    name: str
    forward_factor: float = 1.0


@dataclass(frozen=True, slots=True)
class Pipeline:
    """One demo inference service and its traffic.

    ``requests_per_s`` is the daily mean rate (before :func:`diurnal_factor`).
    ``model_versions`` is (baseline, candidate); see :func:`candidate_share_at` for when the
    candidate gets traffic. ``rollout_period_s``/``rollout_phase`` place that schedule in time,
    and ``diurnal_amplitude``/``peak_hour_utc`` shape the daily traffic curve.
    """

    name: str
    service_version: str
    http_method: str
    http_route: str
    requests_per_s: float
    stages: tuple[Stage, ...]
    cache_hit_rate: float
    error_rate: float
    model_versions: tuple[ModelVersion, ModelVersion]
    rollout_period_s: float
    rollout_phase: float
    diurnal_amplitude: float
    peak_hour_utc: float
    gap: LatencyDist

    @property
    def root_name(self) -> str:
        """The root SERVER span's name, e.g. ``POST /v1/score``."""
        return f"{self.http_method} {self.http_route}"


@dataclass(frozen=True, slots=True)
class RequestBatch:
    """``n`` sampled requests of one pipeline, as arrays (durations in integer nanoseconds).

    A request runs its stages in order with a gap before each stage and one after the last
    (request parsing, handing over between stages, writing the response). A failing request stops
    after its ``error_stage``: later stages did not run and have zero duration and zero gap, so
    the root duration is always ``stage_ns.sum(1) + gap_ns.sum(1)``.
    """

    stage_ns: npt.NDArray[np.int64]
    """(n, n_stages) stage durations."""
    gap_ns: npt.NDArray[np.int64]
    """(n, n_stages + 1): column s is the gap before stage s, the last one the gap before the
    root ends."""
    cache_hit: npt.NDArray[np.bool_]
    """(n,) whether ``feature_hydration`` hit the cache."""
    model_version_idx: npt.NDArray[np.int8]
    """(n,) index into ``Pipeline.model_versions`` (0 baseline, 1 candidate)."""
    error_stage: npt.NDArray[np.int8]
    """(n,) index of the stage that failed, -1 if the request succeeded."""

    def __len__(self) -> int:
        return len(self.stage_ns)

    @property
    def is_error(self) -> npt.NDArray[np.bool_]:
        """(n,) whether the request failed."""
        return self.error_stage >= 0

    @property
    def ran(self) -> npt.NDArray[np.bool_]:
        """(n, n_stages) whether each stage ran (all of them, or up to the failing one)."""
        return _ran(self.error_stage, self.stage_ns.shape[1])

    @property
    def stage_start_ns(self) -> npt.NDArray[np.int64]:
        """(n, n_stages) start of each stage relative to the root's start."""
        before = np.cumsum(self.gap_ns[:, :-1], axis=1)
        before[:, 1:] += np.cumsum(self.stage_ns[:, :-1], axis=1)
        return before

    @property
    def root_ns(self) -> npt.NDArray[np.int64]:
        """(n,) root span durations."""
        return self.stage_ns.sum(axis=1) + self.gap_ns.sum(axis=1)


def sample_requests(
    pipeline: Pipeline,
    n: int,
    rng: np.random.Generator,
    candidate_share: float | FloatArray = 0.0,
) -> RequestBatch:
    """Sample ``n`` requests of ``pipeline``.

    ``candidate_share`` is the probability that a request is served by the candidate model
    (scalar, or one value per request, e.g. :func:`candidate_share_at` of each arrival time).
    """
    n_stages = len(pipeline.stages)
    durations = np.empty((n, n_stages))
    for s, stage in enumerate(pipeline.stages):
        durations[:, s] = stage.latency.sample_ns(n, rng)

    cache_hit = rng.random(n) < pipeline.cache_hit_rate
    misses = ~cache_hit
    miss_dist = pipeline.stages[HYDRATION_INDEX].cache_miss
    if miss_dist is not None:
        durations[misses, HYDRATION_INDEX] = miss_dist.sample_ns(int(misses.sum()), rng)

    model_version_idx = (rng.random(n) < candidate_share).astype(np.int8)
    forward_factors = np.array([v.forward_factor for v in pipeline.model_versions])
    durations[:, FORWARD_INDEX] *= forward_factors[model_version_idx]

    gaps = pipeline.gap.sample_ns(n * (n_stages + 1), rng).reshape(n, n_stages + 1)

    error_stage = np.full(n, -1, dtype=np.int8)
    failed = rng.random(n) < pipeline.error_rate
    weights = np.array([stage.error_weight for stage in pipeline.stages])
    error_stage[failed] = rng.choice(n_stages, size=int(failed.sum()), p=weights / weights.sum())

    skipped = ~_ran(error_stage, n_stages)
    durations[skipped] = 0.0
    # Zero the gaps before skipped stages but keep the last one: a failed request still
    # writes its error response.
    gaps[:, :-1][skipped] = 0.0
    return RequestBatch(
        stage_ns=np.rint(durations).astype(np.int64),
        gap_ns=np.rint(gaps).astype(np.int64),
        cache_hit=cache_hit,
        model_version_idx=model_version_idx,
        error_stage=error_stage,
    )


def _ran(error_stage: npt.NDArray[np.int8], n_stages: int) -> npt.NDArray[np.bool_]:
    last = np.where(error_stage >= 0, error_stage, n_stages - 1)
    return np.arange(n_stages) <= last[:, None]


class Schedule(Protocol):
    """What places a pipeline's traffic in time: its daily curve and its rollouts."""

    @property
    def rollout_period_s(self) -> float: ...
    @property
    def rollout_phase(self) -> float: ...
    @property
    def diurnal_amplitude(self) -> float: ...
    @property
    def peak_hour_utc(self) -> float: ...


def diurnal_factor(pipeline: Schedule, t_unix_s: float | FloatArray) -> FloatArray:
    """Traffic multiplier at ``t_unix_s``: above 1 in the pipeline's daytime, below at night.

    A cosine over the day peaking at ``peak_hour_utc``; its mean over a day is exactly 1, so
    ``requests_per_s`` stays the daily mean rate.
    """
    hours = np.asarray(t_unix_s, dtype=np.float64) / 3600.0
    angle = 2.0 * math.pi * (hours - pipeline.peak_hour_utc) / 24.0
    return 1.0 + pipeline.diurnal_amplitude * np.cos(angle)


def candidate_share_at(pipeline: Schedule, t_unix_s: float | FloatArray) -> FloatArray:
    """Share of traffic on the candidate model version at ``t_unix_s``.

    Follows :data:`ROLLOUT_STEPS` once per ``rollout_period_s``, offset by ``rollout_phase`` (a
    fraction of the period) so the pipelines do not all deploy at once.
    """
    position = np.asarray(t_unix_s, dtype=np.float64) / pipeline.rollout_period_s
    fraction = (position + pipeline.rollout_phase) % 1.0
    starts = np.array([0.0] + [start for start, _ in ROLLOUT_STEPS])
    shares = np.array([0.0] + [share for _, share in ROLLOUT_STEPS])
    return shares[np.searchsorted(starts, fraction, side="right") - 1]


def _stages(
    *,
    queue: tuple[float, float],
    hydration_hit: tuple[float, float],
    hydration_miss: tuple[float, float],
    preprocess: tuple[float, float],
    forward: tuple[float, float],
    postprocess: tuple[float, float],
    serialize: tuple[float, float],
    cap_ms: float,
) -> tuple[Stage, ...]:
    """The six stages from per-stage (median ms, sigma), with the failure modes all pipelines
    share: feature-store timeouts, bad payloads, model execution errors, broken outputs."""

    def dist(median_sigma: tuple[float, float], **tail: float) -> LatencyDist:
        return LatencyDist(*median_sigma, cap_ms=cap_ms, **tail)

    return (
        # Queueing is bursty: rare but long waits when a traffic spike meets a full worker pool.
        Stage(QUEUE_WAIT, dist(queue, tail_prob=0.02, tail_scale=8.0, tail_alpha=1.5)),
        Stage(
            FEATURE_HYDRATION,
            dist(hydration_hit),
            cache_miss=dist(hydration_miss, tail_prob=0.02),
            error_weight=0.35,
            error_type="FeatureStoreTimeout",
            error_http_status=504,
        ),
        Stage(
            PREPROCESS,
            dist(preprocess),
            error_weight=0.15,
            error_type="FeatureEncodingError",
            error_http_status=500,
        ),
        Stage(
            MODEL_FORWARD,
            dist(forward),
            error_weight=0.4,
            error_type="ModelExecutionError",
            error_http_status=500,
        ),
        Stage(
            POSTPROCESS,
            dist(postprocess),
            error_weight=0.1,
            error_type="OutputContractError",
            error_http_status=500,
        ),
        Stage(SERIALIZE, dist(serialize)),
    )


CATALOGUE = Path(__file__).with_name("pipelines.toml")


def _pipeline(entry: dict[str, Any], gap: LatencyDist) -> Pipeline:
    latency = dict(entry["latency_ms"])
    cap_ms = latency.pop("cap")
    baseline, candidate = (ModelVersion(name, factor) for name, factor in entry["model_versions"])
    return Pipeline(
        name=entry["name"],
        service_version=entry["service_version"],
        http_method=entry["http_method"],
        http_route=entry["http_route"],
        requests_per_s=entry["requests_per_s"],
        stages=_stages(cap_ms=cap_ms, **{stage: tuple(ms) for stage, ms in latency.items()}),
        cache_hit_rate=entry["cache_hit_rate"],
        error_rate=entry["error_rate"],
        model_versions=(baseline, candidate),
        rollout_period_s=entry["rollout_period_days"] * _DAY_S,
        rollout_phase=entry["rollout_phase"],
        diurnal_amplitude=entry["diurnal_amplitude"],
        peak_hour_utc=entry["peak_hour_utc"],
        gap=gap,
    )


def _catalogue(path: Path) -> tuple[Pipeline, ...]:
    """The demo pipelines of ``pipelines.toml`` (its comments say what each figure means)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    gap = LatencyDist(**data["gap"])
    return tuple(_pipeline(entry, gap) for entry in data["pipelines"])


PIPELINES: tuple[Pipeline, ...] = _catalogue(CATALOGUE)
FRAUD_SCORER, RECOMMENDER, CLINICAL_ALERTS = PIPELINES
