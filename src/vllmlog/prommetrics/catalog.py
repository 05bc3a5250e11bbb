"""Which vLLM `/metrics` names exist in which release: one table, everything else derives from it.

Source: the shared reference `vllm-formats.md` §3.3 (V0), §3.4 (V1), §3.6 (renames). Names are the
*exposed* family names as `prometheus_client` prints them (counters always end in `_total`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError

Version = tuple[int, int, int]

#: The newest release the catalog was checked against.
LATEST: Version = (0, 33, 0)
_OPEN: Version = (99, 0, 0)


def parse_version(text: str) -> Version:
    """Parse "0.10", "0.10.2", "v0.9.2rc1", "0.10.x" into a comparable (major, minor, patch) tuple."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+|x))?", str(text))
    if not m:
        raise ConfigError(f"not a vLLM version: {text!r}", hint="use MAJOR.MINOR[.PATCH], e.g. 0.10.2")
    patch = m.group(3)
    return (int(m.group(1)), int(m.group(2)), 99 if patch == "x" else int(patch or 0))


def format_version(v: Version) -> str:
    """Render a version tuple the way vLLM does."""
    return f"{v[0]}.{v[1]}.{v[2]}"


@dataclass(slots=True, frozen=True)
class MetricSpec:
    """One exposed metric family and the releases that emit it."""

    name: str
    """Exposed family name, e.g. ``vllm:prompt_tokens_total``."""
    kind: str
    """``gauge``, ``counter`` or ``histogram``."""
    engines: frozenset[str]
    """Engine generations that emit it: ``v0``, ``v1`` and/or ``frontend`` (API-server HTTP metrics)."""
    since: Version
    """First release that exposes it (inclusive)."""
    until: Version = _OPEN
    """Last release that exposes it (inclusive; hidden-by-default releases count as gone)."""
    role: str | None = None
    """Semantic role used by scrape judging, alerts and dashboards (``running``, ``ttft`` …)."""
    conditional: bool = False
    """Only emitted with an opt-in flag/feature, so its absence says nothing about the version."""
    unit: str = ""
    """Unit of the value (``s``, ``tokens``, ``ratio`` …)."""

    def exists_in(self, version: Version, engine: str | None = None) -> bool:
        """True when this family is exposed by `version` (optionally by one engine generation)."""
        if engine is not None and engine not in self.engines:
            return False
        return self.since <= version <= self.until


def _v(text: str) -> Version:
    return parse_version(text)


def _m(name: str, kind: str, engines: str, since: str, until: str | None = None, role: str | None = None,
       conditional: bool = False, unit: str = "") -> MetricSpec:
    return MetricSpec(name, kind, frozenset(engines.split(",")), _v(since), _v(until) if until else _OPEN,
                      role, conditional, unit)


# fmt: off
#: The catalog. V0 rows are the V0 engine (0.2.3–0.10.x), V1 rows the V1 engine (0.7.1+).
CATALOG: tuple[MetricSpec, ...] = (
    # --- V0 engine (vllm/engine/metrics.py) ---
    _m("vllm:num_requests_running", "gauge", "v0", "0.2.3", "0.10.x", "running", unit="requests"),
    _m("vllm:num_requests_waiting", "gauge", "v0", "0.2.3", "0.10.x", "waiting", unit="requests"),
    _m("vllm:num_requests_swapped", "gauge", "v0", "0.2.3", "0.8.x", "swapped", unit="requests"),
    _m("vllm:gpu_cache_usage_perc", "gauge", "v0", "0.2.3", "0.10.x", "kv_usage", unit="ratio"),
    _m("vllm:cpu_cache_usage_perc", "gauge", "v0", "0.2.3", "0.8.x", "cpu_kv_usage", unit="ratio"),
    _m("vllm:gpu_prefix_cache_hit_rate", "gauge", "v0", "0.5.5", "0.8.x", "prefix_hit_rate", unit="ratio"),
    _m("vllm:cpu_prefix_cache_hit_rate", "gauge", "v0", "0.5.5", "0.8.x", None, unit="ratio"),
    _m("vllm:avg_prompt_throughput_toks_per_s", "gauge", "v0", "0.2.3", "0.6.6", "avg_prompt_throughput", unit="tokens/s"),
    _m("vllm:avg_generation_throughput_toks_per_s", "gauge", "v0", "0.2.3", "0.6.6", "avg_generation_throughput", unit="tokens/s"),
    _m("vllm:prompt_tokens_total", "counter", "v0", "0.3.3", "0.10.x", "prompt_tokens", unit="tokens"),
    _m("vllm:generation_tokens_total", "counter", "v0", "0.3.3", "0.10.x", "generation_tokens", unit="tokens"),
    _m("vllm:num_preemptions_total", "counter", "v0", "0.4.3", "0.10.x", "preemptions", unit="preemptions"),
    _m("vllm:request_success_total", "counter", "v0", "0.4.2", "0.10.x", "request_success", unit="requests"),
    _m("vllm:time_to_first_token_seconds", "histogram", "v0", "0.3.3", "0.10.x", "ttft", unit="s"),
    _m("vllm:time_per_output_token_seconds", "histogram", "v0", "0.3.3", "0.10.x", "itl", unit="s"),
    _m("vllm:inter_token_latency_seconds", "histogram", "v0", "0.10.2", "0.10.x", "itl", unit="s"),
    _m("vllm:e2e_request_latency_seconds", "histogram", "v0", "0.3.3", "0.10.x", "e2e", unit="s"),
    _m("vllm:request_queue_time_seconds", "histogram", "v0", "0.6.4", "0.10.x", "queue_time", unit="s"),
    _m("vllm:request_inference_time_seconds", "histogram", "v0", "0.6.4", "0.10.x", "inference_time", unit="s"),
    _m("vllm:request_prefill_time_seconds", "histogram", "v0", "0.6.4", "0.10.x", "prefill_time", unit="s"),
    _m("vllm:request_decode_time_seconds", "histogram", "v0", "0.6.4", "0.10.x", "decode_time", unit="s"),
    _m("vllm:time_in_queue_requests", "histogram", "v0", "0.6.4", "0.8.x", None, unit="s"),
    _m("vllm:model_forward_time_milliseconds", "histogram", "v0", "0.6.4", "0.8.x", None, conditional=True, unit="ms"),
    _m("vllm:model_execute_time_milliseconds", "histogram", "v0", "0.6.4", "0.8.x", None, conditional=True, unit="ms"),
    _m("vllm:request_prompt_tokens", "histogram", "v0", "0.4.2", "0.10.x", "request_prompt_tokens", unit="tokens"),
    _m("vllm:request_generation_tokens", "histogram", "v0", "0.4.2", "0.10.x", "request_generation_tokens", unit="tokens"),
    _m("vllm:request_params_n", "histogram", "v0", "0.4.2", "0.10.x", None),
    _m("vllm:request_params_best_of", "histogram", "v0", "0.4.2", "0.6.2", None),
    _m("vllm:request_max_num_generation_tokens", "histogram", "v0", "0.6.4", "0.10.x", "max_generation_tokens", unit="tokens"),
    _m("vllm:request_params_max_tokens", "histogram", "v0", "0.6.4", "0.10.x", None, unit="tokens"),
    _m("vllm:iteration_tokens_total", "histogram", "v0", "0.6.4", "0.10.x", "iteration_tokens", unit="tokens"),
    _m("vllm:tokens_total", "counter", "v0", "0.6.4", "0.7.3", None, unit="tokens"),
    _m("vllm:lora_requests_info", "gauge", "v0", "0.6.4", "0.10.x", None, conditional=True),
    _m("vllm:spec_decode_draft_acceptance_rate", "gauge", "v0", "0.5.3", "0.9.x", None, conditional=True),
    _m("vllm:spec_decode_efficiency", "gauge", "v0", "0.5.3", "0.9.x", None, conditional=True),
    _m("vllm:spec_decode_num_accepted_tokens_total", "counter", "v0", "0.5.3", "0.9.x", None, conditional=True),
    _m("vllm:spec_decode_num_draft_tokens_total", "counter", "v0", "0.5.3", "0.9.x", None, conditional=True),
    _m("vllm:spec_decode_num_emitted_tokens_total", "counter", "v0", "0.5.3", "0.9.x", None, conditional=True),
    _m("vllm:cache_config_info", "gauge", "v0", "0.3.3", "0.10.x", "cache_config"),
    # --- V1 engine (vllm/v1/metrics/loggers.py) ---
    _m("vllm:num_requests_running", "gauge", "v1", "0.7.1", None, "running", unit="requests"),
    _m("vllm:num_requests_waiting", "gauge", "v1", "0.7.1", None, "waiting", unit="requests"),
    _m("vllm:num_requests_waiting_by_reason", "gauge", "v1", "0.20.0", None, "waiting_by_reason", unit="requests"),
    _m("vllm:num_requests_kv_fetch_by_stage", "gauge", "v1", "0.32.0", None, None, conditional=True),
    _m("vllm:gpu_cache_usage_perc", "gauge", "v1", "0.7.1", "0.10.x", "kv_usage", unit="ratio"),
    _m("vllm:kv_cache_usage_perc", "gauge", "v1", "0.9.2", None, "kv_usage", unit="ratio"),
    _m("vllm:engine_sleep_state", "gauge", "v1", "0.11.2", None, "sleep_state"),
    _m("vllm:prompt_tokens_total", "counter", "v1", "0.7.1", None, "prompt_tokens", unit="tokens"),
    _m("vllm:generation_tokens_total", "counter", "v1", "0.7.1", None, "generation_tokens", unit="tokens"),
    _m("vllm:request_success_total", "counter", "v1", "0.7.2", None, "request_success", unit="requests"),
    _m("vllm:num_preemptions_total", "counter", "v1", "0.8.0", None, "preemptions", unit="preemptions"),
    _m("vllm:gpu_prefix_cache_queries_total", "counter", "v1", "0.7.3", "0.10.x", "prefix_cache_queries", unit="tokens"),
    _m("vllm:gpu_prefix_cache_hits_total", "counter", "v1", "0.7.3", "0.10.x", "prefix_cache_hits", unit="tokens"),
    _m("vllm:prefix_cache_queries_total", "counter", "v1", "0.9.2", None, "prefix_cache_queries", unit="tokens"),
    _m("vllm:prefix_cache_hits_total", "counter", "v1", "0.9.2", None, "prefix_cache_hits", unit="tokens"),
    _m("vllm:external_prefix_cache_queries_total", "counter", "v1", "0.11.2", None, None, unit="tokens"),
    _m("vllm:external_prefix_cache_hits_total", "counter", "v1", "0.11.2", None, None, unit="tokens"),
    _m("vllm:mm_cache_queries_total", "counter", "v1", "0.11.2", None, None),
    _m("vllm:mm_cache_hits_total", "counter", "v1", "0.11.2", None, None),
    _m("vllm:corrupted_requests_total", "counter", "v1", "0.11.2", None, None, conditional=True),
    _m("vllm:prompt_tokens_by_source_total", "counter", "v1", "0.16.0", None, None, unit="tokens"),
    _m("vllm:prompt_tokens_cached_total", "counter", "v1", "0.16.0", None, None, unit="tokens"),
    _m("vllm:prompt_tokens_recomputed_total", "counter", "v1", "0.16.0", "0.19.x", None, unit="tokens"),
    _m("vllm:prompt_tokens_cached_by_source_total", "counter", "v1", "0.32.0", None, None, unit="tokens"),
    _m("vllm:admission_rejections_total", "counter", "v1", "0.32.0", None, "admission_rejections"),
    _m("vllm:watermark_requests_total", "counter", "v1", "0.32.0", None, None, conditional=True),
    _m("vllm:time_to_first_token_seconds", "histogram", "v1", "0.7.1", None, "ttft", unit="s"),
    _m("vllm:time_per_output_token_seconds", "histogram", "v1", "0.7.1", "0.11.x", "itl", unit="s"),
    _m("vllm:inter_token_latency_seconds", "histogram", "v1", "0.10.2", None, "itl", unit="s"),
    _m("vllm:request_time_per_output_token_seconds", "histogram", "v1", "0.11.0", None, "tpot", unit="s"),
    _m("vllm:e2e_request_latency_seconds", "histogram", "v1", "0.7.3", None, "e2e", unit="s"),
    _m("vllm:request_queue_time_seconds", "histogram", "v1", "0.7.3", None, "queue_time", unit="s"),
    _m("vllm:request_prefill_time_seconds", "histogram", "v1", "0.7.3", None, "prefill_time", unit="s"),
    _m("vllm:request_decode_time_seconds", "histogram", "v1", "0.7.3", None, "decode_time", unit="s"),
    _m("vllm:request_inference_time_seconds", "histogram", "v1", "0.7.3", None, "inference_time", unit="s"),
    _m("vllm:request_prompt_tokens", "histogram", "v1", "0.7.1", None, "request_prompt_tokens", unit="tokens"),
    _m("vllm:request_generation_tokens", "histogram", "v1", "0.7.1", None, "request_generation_tokens", unit="tokens"),
    _m("vllm:request_max_num_generation_tokens", "histogram", "v1", "0.8.0", None, "max_generation_tokens", unit="tokens"),
    _m("vllm:request_params_max_tokens", "histogram", "v1", "0.8.0", None, None, unit="tokens"),
    _m("vllm:request_params_n", "histogram", "v1", "0.8.0", None, None),
    _m("vllm:request_prefill_kv_computed_tokens", "histogram", "v1", "0.13.0", None, None, unit="tokens"),
    _m("vllm:request_num_preemptions", "histogram", "v1", "0.30.0", None, None),
    _m("vllm:iteration_tokens_total", "histogram", "v1", "0.7.3", None, "iteration_tokens", unit="tokens"),
    _m("vllm:kv_block_lifetime_seconds", "histogram", "v1", "0.12.0", None, None, conditional=True, unit="s"),
    _m("vllm:kv_block_idle_before_evict_seconds", "histogram", "v1", "0.12.0", None, None, conditional=True, unit="s"),
    _m("vllm:kv_block_reuse_gap_seconds", "histogram", "v1", "0.12.0", None, None, conditional=True, unit="s"),
    _m("vllm:spec_decode_num_drafts_total", "counter", "v1", "0.8.5", None, None, conditional=True),
    _m("vllm:spec_decode_num_draft_tokens_total", "counter", "v1", "0.8.3", None, None, conditional=True),
    _m("vllm:spec_decode_num_accepted_tokens_total", "counter", "v1", "0.8.3", None, None, conditional=True),
    _m("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "v1", "0.8.5", None, None, conditional=True),
    _m("vllm:estimated_flops_per_gpu_total", "counter", "v1", "0.17.0", None, None, conditional=True),
    _m("vllm:estimated_read_bytes_per_gpu_total", "counter", "v1", "0.17.0", None, None, conditional=True),
    _m("vllm:estimated_write_bytes_per_gpu_total", "counter", "v1", "0.17.0", None, None, conditional=True),
    _m("vllm:lora_requests_info", "gauge", "v1", "0.8.0", None, None, conditional=True),
    _m("vllm:cache_config_info", "gauge", "v1", "0.8.0", None, "cache_config"),
    # --- API-server HTTP metrics (prometheus-fastapi-instrumentator, 0.8.3+) ---
    _m("http_requests_total", "counter", "frontend", "0.8.3", None, "http_requests", unit="requests"),
    _m("http_request_duration_seconds", "histogram", "frontend", "0.8.3", None, None, unit="s"),
)
# fmt: on

#: Preferred name first: when a role has several live names in one release, the first present wins.
ROLE_PREFERENCE: dict[str, tuple[str, ...]] = {
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds",
             "vllm:inter_token_latency_seconds"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}

#: Labels that identify one vLLM engine series (besides the target's job/instance).
SERIES_LABELS: tuple[str, ...] = ("model_name", "engine")


def engines_for(version: Version) -> frozenset[str]:
    """Engine generations a `vllm serve` of this release can run (V0 and V1 overlap in 0.8–0.10)."""
    if version < (0, 8, 0):
        return frozenset({"v0", "frontend"})
    if version < (0, 11, 0):
        return frozenset({"v0", "v1", "frontend"})
    return frozenset({"v1", "frontend"})


def default_engine(version: Version) -> str:
    """The engine generation `vllm serve` uses by default in this release."""
    return "v0" if version < (0, 8, 0) else "v1"


def metrics_for(version: Version, engine: str | None = None) -> list[MetricSpec]:
    """Every catalog entry exposed by `version` (all its engines, or one engine)."""
    engines = engines_for(version) if engine is None else frozenset({engine, "frontend"})
    return [s for s in CATALOG if s.exists_in(version) and s.engines & engines]


def names_for(version: Version, engine: str | None = None) -> set[str]:
    """Exposed family names for `version`."""
    return {s.name for s in metrics_for(version, engine)}


def sample_names_for(version: Version, engine: str | None = None) -> set[str]:
    """Every sample name a scrape of `version` may contain (histograms expanded to _bucket/_sum/_count)."""
    out: set[str] = set()
    for s in metrics_for(version, engine):
        if s.kind == "histogram":
            out.update(f"{s.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        else:
            out.add(s.name)
    return out


def role_names(role: str, version: Version | None = None, engine: str | None = None) -> list[str]:
    """Names that play `role`, preferred first; limited to those exposed by `version` when given."""
    specs = [s for s in CATALOG if s.role == role]
    if version is not None:
        allowed = engines_for(version) if engine is None else frozenset({engine, "frontend"})
        specs = [s for s in specs if s.exists_in(version) and s.engines & allowed]
    names: list[str] = []
    for n in ROLE_PREFERENCE.get(role, ()):
        if any(s.name == n for s in specs):
            names.append(n)
    for s in specs:
        if s.name not in names:
            names.append(s.name)
    return names


def kind_of(name: str) -> str | None:
    """The metric type of a catalog family name."""
    for s in CATALOG:
        if s.name == name:
            return s.kind
    return None


def renamed(old: str) -> str | None:
    """The replacement of a renamed/removed name (§3.6), or None."""
    for role, names in ROLE_PREFERENCE.items():
        if old in names[1:]:
            return names[0]
    return None
