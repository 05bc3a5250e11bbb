"""`vllmlog fleet` names replicas from the log's own host/pid when the path says nothing, splits one file that
merges several hosts or concurrent servers, and reads rotated pieces as one stream with evidence (JSON and the
replica's own HTML report) pointing at the piece and its own line."""

from __future__ import annotations

import gzip
import heapq
import os
import re
from pathlib import Path

import pytest

from vllmlog.fleet import analyze_fleet, discover, synth
from vllmlog.fleet.hosts import _slots, identity, line_id, split_hosts

DATA = Path(__file__).parent / "data" / "fleet"
LIGHT = str(DATA / "light-load.log.gz")
OVERLOAD = str(DATA / "overload-queueing.log.gz")
DEAD = str(DATA / "engine-dead-kill9.log.gz")
_TS = re.compile(rb"(\d\d)-(\d\d) (\d\d:\d\d:\d\d)")
_MON = [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"]


def _records(data: bytes, journal: tuple[str, int] | None = None) -> list[tuple[bytes, int, bytes]]:
    """(timestamp, index, text) per record; journald-wrapped (host, pid) lines when ``journal``. A record is a
    line and the untagged lines after it (a traceback, uvicorn's access lines in 0.32): written at once."""
    out: list[tuple[bytes, int, bytes]] = []
    last = b"00-00 00:00:00"
    for i, ln in enumerate(data.splitlines(keepends=True)):
        m = _TS.search(ln)
        if m:
            last = m.group(0)
        if journal:
            mo, d, t = _TS.match(last).groups() if _TS.match(last) else (b"11", b"30", b"00:00:00")
            ln = b"%s %s %s %s vllm[%d]: " % (_MON[int(mo) - 1] if int(mo) else b"Nov", d, t, journal[0].encode(),
                                            journal[1]) + ln
        if journal is None and not ln.startswith(b"("):
            if not out:  # before the first tagged line: no file could say whose it is; left out
                continue
            ts, j, txt = out[-1]
            out[-1] = (ts, j, txt + ln)
        else:
            out.append((last, i, ln))
    return out


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, synth.Plan]:
    root = tmp_path_factory.mktemp("hosts")
    plan = synth.Plan([synth.Replica("a", LIGHT, 0), synth.Replica("b", OVERLOAD, 1),
                       synth.Replica("c", DEAD, 2, truth="bad")])
    synth.write_fleet(plan, str(root / "plain"))
    return root, plan


def test_line_identity() -> None:
    j = line_id(b"Sep 30 02:00:08 gpu-07 vllm@qwen3-8b[5120]: \x1b[1;36m(APIServer pid=5120)\x1b[0;0m INFO 09-30 x")
    assert (j.host, j.root, j.child) == ("gpu-07", 5120, None)
    assert line_id(b"Sep 30 02:00:05 gpu-07 systemd[1]: Started vllm@qwen3-8b.service.").root is None
    c = line_id(b"vllm-2  | (EngineCore_DP0 pid=112) INFO 05-11 17:58:40 [core.py:644] Waiting")
    assert (c.host, c.root, c.child) == ("vllm-2", None, 112)
    r = line_id(b"(RayWorkerWrapper pid=9, ip=10.0.0.2) INFO 05-11 17:58:40 [worker.py:1] x")
    assert (r.host, r.root, r.child) == (None, None, 9)
    assert line_id(b"Loading safetensors checkpoint shards: 100% Completed | 1/1").host is None


def test_a_restart_is_one_replica_concurrent_servers_are_two() -> None:
    restart = [b"Sep 30 02:00:05 gpu-07 vllm[5120]: INFO 09-30 02:00:05 [api_server.py:1] x"] * 3 + \
        [b"Sep 30 02:00:05 gpu-07 systemd[1]: Stopped"] + [b"Sep 30 02:10:05 gpu-07 vllm[6033]: INFO 09-30 02:10:05 [a.py:1] x"] * 3
    ident = identity(restart)
    assert ident.host == "gpu-07" and not ident.merged
    both = [b"(APIServer pid=100) INFO 09-30 02:00:05 [a.py:1] x", b"(APIServer pid=200) INFO 09-30 02:00:05 [a.py:1] y"] * 3
    assert identity(both).merged and identity(both).host is None
    span = {("h", 1): [0, 10], ("h", 2): [5, 30], ("h", 3): [12, 40], ("g", 9): [0, 40]}
    assert _slots(list(span), span) == [[("h", 1), ("h", 3)], [("h", 2)], [("g", 9)]]


def test_same_file_name_per_host_named_by_the_logs_host(three, tmp_path: Path) -> None:
    """Every host's log is `vllm.log` in a directory that says nothing: the replicas take the journal's host."""
    root, plan = three
    for k, (r, host, pid) in enumerate(zip(plan.replicas, ("gpu-a", "gpu-b", "gpu-c"), (31488, 9706, 2466))):
        d = tmp_path / "logs" / f"2026-11-30-{k}"
        d.mkdir(parents=True)
        data = (root / "plain" / f"{r.name}.log").read_bytes()
        (d / "vllm.log").write_bytes(b"".join(x[2] for x in _records(data, (host, pid))))
    d = discover([str(tmp_path / "logs")])
    assert [r.name for r in d.replicas] == ["gpu-a", "gpu-b", "gpu-c"]
    # the same files without a host: told apart by their directory, as before
    for k in range(3):
        p = tmp_path / "bare" / f"n{k}" / "vllm.log"
        p.parent.mkdir(parents=True)
        p.write_bytes((root / "plain" / f"{plan.replicas[k].name}.log").read_bytes())
    assert [r.name for r in discover([str(tmp_path / "bare")]).replicas] == ["n0/vllm", "n1/vllm", "n2/vllm"]


def test_merged_journal_of_three_hosts_is_split_by_host(three, tmp_path: Path) -> None:
    """One file that merges three hosts' journals (a central syslog): one replica per host, each giving the
    numbers and verdict of its own host's log read alone."""
    root, plan = three
    streams = []
    (tmp_path / "apart").mkdir()
    for r, host, pid in zip(plan.replicas, ("gpu-a", "gpu-b", "gpu-c"), (31488, 9706, 2466)):
        recs = _records((root / "plain" / f"{r.name}.log").read_bytes(), (host, pid))
        (tmp_path / "apart" / f"{host}.log").write_bytes(b"".join(x[2] for x in recs))
        streams.append(recs)
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "syslog.log").write_bytes(b"".join(x[2] for x in heapq.merge(*streams)))
    merged = analyze_fleet([str(tmp_path / "merged")], workers=2, out_dir=str(tmp_path / "o1"))
    apart = analyze_fleet([str(tmp_path / "apart")], workers=2, out_dir=str(tmp_path / "o2"))
    assert [r["replica"] for r in merged.replicas] == ["gpu-a", "gpu-b", "gpu-c"]
    for x, y in zip(merged.replicas, apart.replicas):
        assert x["error"] is None
        assert x["lines"] == y["lines"]
        assert x["red_use"]["requests"] == y["red_use"]["requests"]
        assert x["verdict"]["status"] == y["verdict"]["status"]
        assert [i["headline"] for i in x["incidents"]] == [i["headline"] for i in y["incidents"]]
    assert merged.report["replicas"][0]["replica"] == "gpu-c"  # the dead engine's host first


def test_merged_file_of_concurrent_servers_is_split_by_pid(three, tmp_path: Path) -> None:
    """One plain file two+ servers wrote at once (no journal): split by vLLM's `(APIServer pid=N)` tag, children
    (`EngineCore`, `Worker`) with the closest lower server pid; named `<file>-pid<N>`."""
    root, plan = three
    streams = [_records((root / "plain" / f"{r.name}.log").read_bytes()) for r in plan.replicas]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "vllm.log").write_bytes(b"".join(x[2] for x in heapq.merge(*streams)))
    for r, recs in zip(plan.replicas, streams):
        (tmp_path / f"{r.name}.log").write_bytes(b"".join(x[2] for x in recs))
    fa = analyze_fleet([str(tmp_path / "m")], workers=0, out_dir=str(tmp_path / "o"))
    names = {"a": "vllm-pid31488", "b": "vllm-pid9706", "c": "vllm-pid2466"}
    assert sorted(r["replica"] for r in fa.replicas) == sorted(names.values())
    alone = {r.name: analyze_fleet([str(tmp_path / f"{r.name}.log")], workers=0,
                                   out_dir=str(tmp_path / f"x{r.name}")).replicas[0] for r in plan.replicas}
    got = {r["replica"]: r for r in fa.replicas}
    for short, name in names.items():
        x, y = got[name], alone[short]
        assert x["lines"] == y["lines"]
        assert x["red_use"]["requests"] == y["red_use"]["requests"]
        assert x["verdict"]["status"] == y["verdict"]["status"]


def test_compose_client_containers_are_no_replicas(tmp_path: Path) -> None:
    """A compose file: the vLLM containers are replicas, the client beside them is none."""
    vl = b"(APIServer pid=1) INFO 11-30 10:00:%02d [api_server.py:1] serving\n"
    one = b"".join([b"vllm-1  | " + vl % i + b"evaluator-1  | sending request %d\n" % i for i in range(5)])
    ident = identity(one.splitlines())
    assert ident.hosts == ["vllm-1"] and not ident.merged  # one replica: the client is not one
    two = b"".join([b"vllm-1  | " + vl % i + b"vllm-2  | " + vl % i + b"evaluator-1  | sent %d\n" % i for i in range(5)])
    (tmp_path / "compose.log").write_bytes(two)
    assert identity(two.splitlines()).merged
    out = split_hosts({"name": "compose", "paths": [str(tmp_path / "compose.log")]}, {"split_dir": str(tmp_path / "s")})
    assert [p["name"] for p in out["pods"]] == ["vllm-1", "vllm-2"]
    for p in out["pods"]:
        body = Path(p["paths"][0]).read_bytes()
        assert body.count(b"\n") == 5 and body.startswith(p["name"].encode() + b"  | ")


def test_split_hosts_keeps_a_one_replica_file_whole(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    with gzip.open(LIGHT) as f:
        p.write_bytes(f.read())
    out = split_hosts({"name": "x", "paths": [str(p)]}, {"split_dir": str(tmp_path / "s")})
    assert out == {"parent": "x", "pods": [{"name": "x", "paths": [str(p)]}]}


def test_rotated_gz_pieces_evidence_in_the_replica_report(tmp_path: Path) -> None:
    """Rotated .gz pieces of one replica: one stream; the replica's own HTML report names each evidence line by
    its piece and that piece's own line number, never the joined temporary copy."""
    synth.write_fleet(synth.Plan([synth.Replica("one", DEAD, pieces=3)]), str(tmp_path / "logs"))
    fa = analyze_fleet([str(tmp_path / "logs")], workers=0, out_dir=str(tmp_path / "out"), replica_reports=True)
    r = fa.replicas[0]
    assert r["files"] == [str(tmp_path / "logs" / n) for n in ("one.log.2.gz", "one.log.1", "one.log")]
    html = (Path(fa.reports_dir) / r["report"]).read_text()
    assert "vllmlog-fleet-" not in html and not re.findall(r"one-[0-9a-f]{8}\.log", html)
    refs = set(re.findall(r"(one\.log(?:\.\d+)?(?:\.gz)?):(\d+)", html))
    assert {f for f, _ in refs} >= {"one.log.1", "one.log"}  # evidence from more than one piece
    pieces = {}
    for n in ("one.log.2.gz", "one.log.1", "one.log"):
        p = tmp_path / "logs" / n
        pieces[n] = (gzip.open(p).read() if n.endswith(".gz") else p.read_bytes()).decode().splitlines()
    for inc in r["incidents"]:
        for e in inc["evidence"]:
            name = os.path.basename(e["file"])
            assert e["text"].strip() in pieces[name][e["line"] - 1]
            assert f"{name}:{e['line']}" in html or f"{e['file']}:{e['line']}" in html
    for f, ln in refs:
        assert 1 <= int(ln) <= len(pieces[f])
