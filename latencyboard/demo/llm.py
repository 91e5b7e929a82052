"""The demo's LLM pipeline: a chat gateway calling a vLLM server (pure: numpy + stdlib).

A request enters the gateway (its own service), which checks it and calls vLLM's
OpenAI-compatible server; vLLM's span is the one its ``--otlp-traces-endpoint`` exports,
``llm_request``, a SERVER span that starts at the request's arrival and carries the request's
breakdown as float-seconds ``gen_ai.latency.*`` attributes (``vllm/tracing.py``,
``SpanAttributes``; the values as vLLM's output processor computes them)::

    arrival ─ preprocess ─ queued ─ queue ─ scheduled ─ prefill ─ first token ─ decode ─ last token
    time_to_first_token = first token - arrival      e2e = end - arrival
    time_in_model_inference = prefill + decode

Prefill grows with the prompt, decode with the answer: ``decode = (output tokens - 1) x time
per output token``. The candidate model answers at greater length *and* decodes each token
more slowly, so its end-to-end latency rises for two reasons that a length-aware comparison
tells apart. Its rollout follows the other demo pipelines' schedule
(:func:`latencyboard.demo.profiles.candidate_share_at`); a canary runs as a second vLLM
deployment whose resource says which model it serves (``model.version``).

A few requests are refused by the gateway before vLLM sees them (the prompt is longer than the
model's context): an ERROR root span with a recorded exception and no vLLM span.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from latencyboard.demo.profiles import CATALOGUE, LatencyDist, ModelVersion

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class LlmModel:
    """A model vLLM serves: how long its answers run and how fast it writes them."""

    version: ModelVersion
    output_tokens_median: float
    tpot_ms: float  # median time per output token in decode


@dataclass(frozen=True, slots=True)
class LlmPipeline:
    """The gateway and the vLLM server behind it, and their traffic (see the module doc).

    ``rollout_period_s``, ``rollout_phase``, ``diurnal_amplitude`` and ``peak_hour_utc`` place
    the rollout and shape the daily curve as for :class:`latencyboard.demo.profiles.Pipeline`.
    """

    name: str  # vLLM's service.name
    service_version: str  # vLLM's version
    gateway: str  # the gateway's service.name
    gateway_version: str
    http_route: str
    served_model: str  # the model name clients ask for
    requests_per_s: float
    models: tuple[LlmModel, LlmModel]
    rollout_period_s: float
    rollout_phase: float
    diurnal_amplitude: float
    peak_hour_utc: float
    refused_rate: float
    prompt_tokens: tuple[float, float]  # median, sigma of the log
    output_sigma: float
    max_tokens: int
    tpot_sigma: float
    prefill_ms_per_token: float
    prefill: LatencyDist  # the part of prefill that does not grow with the prompt
    queue: LatencyDist
    preprocess: LatencyDist  # arrival to queued: tokenising, validating
    gateway_check: LatencyDist  # the gateway's own work before calling vLLM
    network: LatencyDist  # one way, gateway to vLLM

    @property
    def model_versions(self) -> tuple[ModelVersion, ModelVersion]:
        return self.models[0].version, self.models[1].version

    @property
    def root_name(self) -> str:
        return f"POST {self.http_route}"


@dataclass(frozen=True, slots=True)
class LlmBatch:
    """``n`` sampled requests, as arrays of integer nanoseconds (token counts as counts).

    Offsets are from the gateway root span's start: the vLLM span runs from ``arrival_ns`` to
    ``arrival_ns + e2e_ns``; the gateway's call to vLLM from ``call_ns`` to ``call_end_ns``.
    A refused request has no call and no vLLM span (its vLLM columns are 0).
    """

    check_ns: IntArray
    call_ns: IntArray
    arrival_ns: IntArray
    preprocess_ns: IntArray
    queue_ns: IntArray
    prefill_ns: IntArray
    decode_ns: IntArray
    e2e_ns: IntArray
    call_end_ns: IntArray
    root_ns: IntArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    model_version_idx: npt.NDArray[np.int8]
    refused: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.root_ns)

    @property
    def ttft_ns(self) -> IntArray:
        """vLLM's time to first token: from arrival, so preprocessing and queueing count."""
        return self.preprocess_ns + self.queue_ns + self.prefill_ns


def sample_llm_requests(
    pipeline: LlmPipeline,
    n: int,
    rng: np.random.Generator,
    candidate_share: float | FloatArray = 0.0,
) -> LlmBatch:
    """Sample ``n`` requests; ``candidate_share`` as for
    :func:`latencyboard.demo.profiles.sample_requests`."""
    version = (rng.random(n) < candidate_share).astype(np.int8)
    model_output = np.array([m.output_tokens_median for m in pipeline.models])[version]
    model_tpot = np.array([m.tpot_ms for m in pipeline.models])[version]
    median, sigma = pipeline.prompt_tokens
    prompt = np.clip(np.rint(median * np.exp(sigma * rng.standard_normal(n))), 4, 16_000)
    output = np.clip(
        np.rint(model_output * np.exp(pipeline.output_sigma * rng.standard_normal(n))),
        1,
        pipeline.max_tokens,
    )
    tpot_ns = model_tpot * _NS_PER_MS * np.exp(pipeline.tpot_sigma * rng.standard_normal(n))
    prefill = pipeline.prefill.sample_ns(n, rng) + prompt * pipeline.prefill_ms_per_token * 1e6
    refused = rng.random(n) < pipeline.refused_rate
    columns = {
        "check_ns": pipeline.gateway_check.sample_ns(n, rng),
        "preprocess_ns": pipeline.preprocess.sample_ns(n, rng),
        "queue_ns": pipeline.queue.sample_ns(n, rng),
        "prefill_ns": prefill,
        "decode_ns": (output - 1) * tpot_ns,
    }
    whole = {name: np.rint(values).astype(np.int64) for name, values in columns.items()}
    network_out = np.rint(pipeline.network.sample_ns(n, rng)).astype(np.int64)
    network_back = np.rint(pipeline.network.sample_ns(n, rng)).astype(np.int64)
    for name in ("preprocess_ns", "queue_ns", "prefill_ns", "decode_ns"):
        whole[name][refused] = 0
    network_out[refused] = network_back[refused] = 0
    e2e = whole["preprocess_ns"] + whole["queue_ns"] + whole["prefill_ns"] + whole["decode_ns"]
    call = whole["check_ns"]
    arrival = call + network_out
    call_end = arrival + e2e + network_back
    # The gateway writes its response (or its refusal) in about as long as its checks took.
    root = call_end + whole["check_ns"] // 4
    return LlmBatch(
        check_ns=whole["check_ns"],
        call_ns=call,
        arrival_ns=arrival,
        preprocess_ns=whole["preprocess_ns"],
        queue_ns=whole["queue_ns"],
        prefill_ns=whole["prefill_ns"],
        decode_ns=whole["decode_ns"],
        e2e_ns=e2e,
        call_end_ns=call_end,
        root_ns=root,
        prompt_tokens=prompt.astype(np.int64),
        output_tokens=np.where(refused, 0, output).astype(np.int64),
        model_version_idx=version,
        refused=refused,
    )


def _dist(median_sigma: list[float], cap_ms: float, **tail: float) -> LatencyDist:
    return LatencyDist(median_sigma[0], median_sigma[1], cap_ms=cap_ms, **tail)


def _pipeline(entry: dict[str, Any]) -> LlmPipeline:
    latency = entry["latency_ms"]
    cap = latency["cap"]
    baseline, candidate = (
        LlmModel(ModelVersion(name), output_median, tpot_ms)
        for name, output_median, tpot_ms in entry["models"]
    )
    return LlmPipeline(
        name=entry["name"],
        service_version=entry["service_version"],
        gateway=entry["gateway"],
        gateway_version=entry["gateway_version"],
        http_route=entry["http_route"],
        served_model=entry["served_model"],
        requests_per_s=entry["requests_per_s"],
        models=(baseline, candidate),
        rollout_period_s=entry["rollout_period_days"] * 86_400.0,
        rollout_phase=entry["rollout_phase"],
        diurnal_amplitude=entry["diurnal_amplitude"],
        peak_hour_utc=entry["peak_hour_utc"],
        refused_rate=entry["refused_rate"],
        prompt_tokens=(entry["prompt_tokens"][0], entry["prompt_tokens"][1]),
        output_sigma=entry["output_sigma"],
        max_tokens=entry["max_tokens"],
        tpot_sigma=entry["tpot_sigma"],
        prefill_ms_per_token=entry["prefill_ms_per_token"],
        prefill=_dist(latency["prefill"], cap),
        # Queueing is bursty: a traffic spike meets a full batch and waits for a slot.
        queue=_dist(latency["queue"], cap, tail_prob=0.03, tail_scale=10.0, tail_alpha=1.4),
        preprocess=_dist(latency["preprocess"], cap, tail_prob=0.0),
        gateway_check=_dist(latency["gateway_check"], cap, tail_prob=0.0),
        network=_dist(latency["network"], cap, tail_prob=0.0),
    )


def _catalogue(path: Path) -> tuple[LlmPipeline, ...]:
    """The ``llm_pipelines`` of ``pipelines.toml``."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return tuple(_pipeline(entry) for entry in data["llm_pipelines"])


LLM_PIPELINES: tuple[LlmPipeline, ...] = _catalogue(CATALOGUE)
VLLM_CHAT = LLM_PIPELINES[0]
