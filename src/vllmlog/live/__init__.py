"""Live monitoring (``vllmlog watch``): follow a growing log or a stream, keep bounded incremental
state over the shared parser and pipeline, export ``vllmlog_*`` metrics, and turn diagnosis findings
into alerts (stdout, Alertmanager, webhook).

    follow.py    tail -F style file follower, non-blocking stream reader
    state.py     LiveState: parser → Pipeline → counters, histograms, gauges (bounded)
    exporter.py  LiveCollector on its own CollectorRegistry, HTTP endpoint (in this process or its own)
    scrapeproc.py  the exporter's child process: /metrics answered outside the parser's GIL
    alerts.py    AlertConfig (alerts.toml), AlertEngine (for / clear_for / staleness)
    notify.py    StreamNotifier, AlertmanagerNotifier, WebhookNotifier
    watch.py     Watcher: the loop that drives them
"""

from .alerts import AlertConfig, AlertEngine, Transition
from .exporter import Health, LiveCollector, make_registry, serve
from .follow import FileFollower, Segment, StreamFollower
from .notify import AlertmanagerNotifier, StreamNotifier, WebhookNotifier
from .state import LiveState
from .watch import Watcher, default_evaluator

__all__ = [
    "AlertConfig", "AlertEngine", "AlertmanagerNotifier", "FileFollower", "Health", "LiveCollector", "LiveState",
    "Segment", "StreamFollower", "StreamNotifier", "Transition", "Watcher", "WebhookNotifier", "default_evaluator",
    "make_registry", "serve",
]
