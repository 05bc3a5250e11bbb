"""`vllmlog watch`: follow a running server's log, export Prometheus metrics, fire alerts."""

from __future__ import annotations

from rich.markup import escape

import logging
import signal
import sys
import threading
from typing import Any, Optional

import typer

from ._app import app
from .common import OptInt, OptStr, ShowPromptsOpt, YearOpt, stderr


@app.command("watch")
def watch_cmd(
    log: str = typer.Argument(..., help="The vLLM log file to follow (like tail -F), or - for standard input.", metavar="LOG|-"),
    listen: str = typer.Option("127.0.0.1:9464", "--listen", help="HOST:PORT of the Prometheus endpoint (/metrics); 'off' disables it."),
    config: OptStr = typer.Option(None, "--config", help="alerts.toml: for/clear_for durations, per-code overrides, diagnose interval."),
    alertmanager: OptStr = typer.Option(None, "--alertmanager", help="Alertmanager base URL (v2 API), e.g. http://127.0.0.1:9093."),
    webhook: OptStr = typer.Option(None, "--webhook", help="POST each alert state change as JSON to this URL."),
    webhook_token_env: OptStr = typer.Option(None, "--webhook-token-env", help="Env var holding a bearer token for --webhook."),
    webhook_hmac_env: OptStr = typer.Option(None, "--webhook-hmac-env", help="Env var holding an HMAC-SHA256 secret to sign --webhook bodies."),
    instance: OptStr = typer.Option(None, "--instance", help="Value of the instance label (default: the host name)."),
    from_end: bool = typer.Option(False, "--from-end", help="Start at the end of an existing file (default: read it from the start)."),
    exit_at_eof: bool = typer.Option(False, "--exit-at-eof", help="Stop when the input is exhausted (stdin closed / file read to its end)."),
    stdout_alerts: bool = typer.Option(True, "--stdout/--no-stdout", help="Print one JSON line per alert state change."),
    poll_interval: float = typer.Option(0.1, "--poll-interval", help="Seconds between file polls."),
    max_inflight: OptInt = typer.Option(None, "--max-inflight", help="Cap on tracked in-flight requests (default 10000)."),
    year: OptInt = YearOpt,
    otlp_listen: OptStr = typer.Option(None, "--otlp-listen", help="Also receive OpenTelemetry traces on HOST:PORT "
                                       "(OTLP/HTTP POST /v1/traces, protobuf or JSON; e.g. 127.0.0.1:4318): point "
                                       "vllm serve --otlp-traces-endpoint http://HOST:PORT/v1/traces here for exact "
                                       "per-request timings."),
    otlp_max_bytes: int = typer.Option(16 << 20, "--otlp-max-bytes", help="Largest OTLP request body accepted "
                                       "(larger, or inflating past it: 400)."),
    show_prompts: bool = ShowPromptsOpt,
    exporter: str = typer.Option("process", "--exporter", help="Where /metrics is answered: 'process' (a child "
                                 "process, so scrapes never wait for the parser) or 'thread' (in this process)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log rotations, notifier retries and rule errors on stderr."),
) -> None:
    """Follow a vLLM log (or stdin), export vllmlog_* metrics for Prometheus, and alert when a diagnosis rule fires."""
    from ..ingest import check_path
    from ..live.alerts import AlertConfig, AlertEngine
    from ..errors import ConfigError
    from ..live.exporter import LiveCollector, make_registry, serve, serve_process
    from ..live.httpserver import BoundedHTTPServer
    from ..live.follow import FileFollower, StreamFollower
    from ..live.notify import AlertmanagerNotifier, StreamNotifier, WebhookNotifier, default_instance
    from ..live.state import LiveState
    from ..live.watch import Watcher, default_evaluator
    from ..redact import Redactor

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="vllmlog: %(levelname)s %(message)s")
    if exporter not in ("process", "thread"):
        raise ConfigError(f"--exporter {exporter!r}", hint="use --exporter process or --exporter thread")
    cfg = AlertConfig.load(config) if config else AlertConfig()
    if max_inflight is not None:
        cfg.max_inflight = max_inflight
    if log != "-":
        try:
            check_path(log)
        except Exception as exc:  # a file that does not exist yet is fine: tail -F waits for it
            if "no such file" not in str(exc):
                raise
            stderr.print(f"[yellow]{escape(log)}: not there yet; waiting for it to appear[/]", markup=True)
    inst = instance if instance is not None else default_instance()
    state = LiveState(log, year=year, max_inflight=cfg.max_inflight)
    source = StreamFollower(sys.stdin.buffer) if log == "-" else FileFollower(log, from_end=from_end)
    notifiers = []
    if stdout_alerts:
        notifiers.append(StreamNotifier(sys.stdout))
    if alertmanager:
        notifiers.append(AlertmanagerNotifier(alertmanager, resend_s=cfg.resend_s))
    if webhook:
        notifiers.append(WebhookNotifier(webhook, token_env=webhook_token_env, hmac_env=webhook_hmac_env))
    engine = AlertEngine(cfg)
    evaluate = default_evaluator(cfg.rules_config(), known_codes=lambda: set(engine.alerts))
    receiver = None
    otlp_where = ""
    if otlp_listen:
        from ..traces.receiver import OtlpReceiver

        receiver = OtlpReceiver(max_body=otlp_max_bytes)
        h, p = receiver.serve(otlp_listen)
        otlp_where = f"; traces: http://{h}:{p}/v1/traces"
    watcher = Watcher(source, state, engine=engine, notifiers=notifiers, evaluate=evaluate, instance=inst,
                      poll_interval=poll_interval, spans=receiver, redactor=Redactor(show_prompts=show_prompts))
    where = "off"
    server: Any = None
    if listen.lower() not in ("off", "none", ""):
        collector = LiveCollector(state, instance=inst, health=watcher.health, alerts=engine,
                                  notifier_stats=watcher.notifier_stats,
                                  otlp=receiver.counters if receiver is not None else None)
        if exporter == "process":
            try:
                server, _ = serve_process(make_registry(collector), listen, instance=inst, health=watcher.health)
            except OSError as exc:  # no child process here (a sandbox): serve from this process, and say so
                stderr.print(f"cannot start the exporter's process ({exc}); serving /metrics from this process",
                             markup=False)
        if server is None:
            server, _ = serve(make_registry(collector), listen)
        host, port = server.server_address[:2]
        where = f"http://{host}:{port}/metrics"
    stderr.print(f"watching {log}; metrics: {where}{otlp_where}; rules: {'on' if evaluate else 'not installed (no alerts)'}")

    stop = threading.Event()

    def _stop(signum: int, frame: Optional[object]) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    try:
        watcher.run(stop, exit_at_eof=exit_at_eof)
    finally:
        watcher.close_notifiers(timeout=5.0)
        if receiver is not None:
            receiver.close()
        if server is not None and not isinstance(server, BoundedHTTPServer):
            server.shutdown()  # the exporter's process ends with its pipe anyway; this waits for it
