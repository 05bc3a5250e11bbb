"""uvicorn's lines: HTTP access lines and server lifecycle (no timestamp of their own)."""

from __future__ import annotations

from .registry import MESSAGES, LinePattern

for _p in [
    LinePattern(
        id="uvicorn.access",
        kind="http_access",
        prefix=None,
        contains=' - "',
        regex=r'^(?P<client>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<http_status>\d{3})(?: (?P<_phrase>.*))?$',
        examples=['127.0.0.1:52814 - "POST /v1/chat/completions HTTP/1.1" 200 OK', '127.0.0.1:5555 - "GET /health HTTP/1.1" 200'],
        doc="HTTP access line (logged when the response starts; no request id, no latency).",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.started",
        kind="server_process_started",
        prefix="Started server process",
        regex=r"^Started server process \[(?P<pid>\d+)\]$",
        examples=["Started server process [31488]"],
        doc="uvicorn started the API server process.",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.startup_waiting",
        kind="server_startup",
        prefix="Waiting for application startup",
        regex=r"^Waiting for application startup\.$",
        examples=["Waiting for application startup."],
        doc="uvicorn waits for the app's startup hooks.",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.ready",
        kind="server_ready",
        prefix="Application startup complete",
        regex=r"^Application startup complete\.$",
        examples=["Application startup complete."],
        doc="The API server is ready to serve (the reliable readiness marker from 0.7.3).",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.listening",
        kind="server_listening",
        prefix="Uvicorn running on ",
        regex=r"^Uvicorn running on (?P<url>\S+)",
        examples=["Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"],
        doc="uvicorn bound its socket (≤0.7.2).",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.shutting_down",
        kind="server_shutdown",
        prefix="Shutting down",
        regex=r"^Shutting down(?: FastAPI HTTP server)?\.?$",
        examples=["Shutting down", "Shutting down FastAPI HTTP server."],
        doc="The API server is shutting down.",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.shutdown_waiting",
        kind="server_shutdown",
        prefix="Waiting for application shutdown",
        regex=r"^Waiting for application shutdown\.$",
        examples=["Waiting for application shutdown."],
        doc="uvicorn runs shutdown hooks.",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.shutdown_complete",
        kind="server_shutdown",
        prefix="Application shutdown complete",
        regex=r"^Application shutdown complete\.$",
        examples=["Application shutdown complete."],
        doc="Shutdown hooks finished.",
        source="uvicorn",
    ),
    LinePattern(
        id="uvicorn.stopped",
        kind="server_stopped",
        prefix="Finished server process",
        regex=r"^Finished server process \[(?P<pid>\d+)\]$",
        examples=["Finished server process [31488]"],
        doc="The API server process exited.",
        source="uvicorn",
    ),
]:
    MESSAGES.add(_p)
