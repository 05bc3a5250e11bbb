"""The service-state model: one ``ServiceState`` per server run (configuration, per-interval signals,
lifecycle, coverage, the run's own baseline) — what symptoms, explainers and the verdict read."""

from .build import service_states
from .config import ServerConfig, server_config
from .model import KV_FULL, Baseline, Coverage, Interval, Lifecycle, ServiceState

__all__ = ["Baseline", "Coverage", "Interval", "KV_FULL", "Lifecycle", "ServerConfig", "ServiceState", "server_config",
           "service_states"]
