"""One file, many replicas: ``kubectl logs -l app=vllm --prefix`` interleaves every pod's lines, each behind
``[pod/<pod>/<container>] ``. Such a file is split by pod — by a worker, like any other reading — into one stream
per pod, and each pod is a replica named after it.

The driver only peeks at the head of a file (``SNIFF_BYTES``) to see whether it holds more than one pod.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from typing import Any

from .inputs import is_url
from .mapper import _open_piece, safe_name

SNIFF_BYTES = 256 * 1024
_POD = re.compile(rb"^\[pod/([^\s/\]]+)/[^\s\]]+\] ")


def _head(path: str) -> bytes:
    try:
        with (gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")) as f:
            return f.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""


def pods_in(path: str) -> list[str]:
    """The pods named by ``--prefix`` lines in the head of ``path`` (local files only; empty when none)."""
    if is_url(path):
        return []
    seen: dict[bytes, None] = {}
    for line in _head(path).split(b"\n"):
        m = _POD.match(line)
        if m:
            seen.setdefault(m.group(1), None)
    return [p.decode("utf-8", "replace") for p in seen]


def split_pods(spec: dict[str, Any], opts: dict[str, Any]) -> dict[str, Any]:
    """Split one replica's pieces (in order) by pod into ``opts["split_dir"]/<file>/<pod>.log``; the new replica
    specs, one per pod, as ``{"parent": name, "pods": [spec…]}`` (lines before any prefix, or without one, stay
    with the pod of the line before them)."""
    out_dir = os.path.join(opts["split_dir"], safe_name(spec["name"]))
    os.makedirs(out_dir, exist_ok=True)
    files: dict[str, Any] = {}
    order: list[str] = []
    cur: str | None = None
    pending: list[bytes] = []
    try:
        for p in spec["paths"]:
            with _open_piece(p) as f:
                for line in f:
                    m = _POD.match(line)
                    if m:
                        cur = m.group(1).decode("utf-8", "replace")
                        if cur not in files:
                            files[cur] = open(os.path.join(out_dir, safe_name(cur) + ".log"), "wb")  # noqa: SIM115
                            order.append(cur)
                            for b in pending:
                                files[cur].write(b)
                            pending = []
                    if cur is None:
                        pending.append(line)
                    else:
                        files[cur].write(line)
    finally:
        for fh in files.values():
            fh.close()
    if not order:  # no prefix after all: the file is one replica
        return {"parent": spec["name"], "pods": [dict(spec)]}
    return {"parent": spec["name"], "pods": [{"name": pod, "paths": [os.path.join(out_dir, safe_name(pod) + ".log")]}
                                             for pod in order]}
