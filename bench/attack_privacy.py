"""Issue 15, judged attack 4: prompts and secrets through every command and exporter.

A real vLLM log (the corpus' light-load run, with its request-logger records) gets one record per prompt shape —
the issue's (``prompt='…'``, ``Prompt:``/``Output:``, ``input: '…'``, ``content='…'``, bytes / list / tuple values,
escaped quotes and multi-line prompts in JSON strings, ``Authorization: Bearer …``, ``'api_key': ['sk-…']``) and a
judge's own (pydantic's ``input_value=…``, ``system_prompt``, JSON in JSON, a multi-line record) —, each prompt
carrying a marker. Every command and exporter runs on it with default options: the marker must appear in no output
(stdout, stderr, files written). With ``--show-prompts`` it must appear (the prompt was there to leak), secrets
still masked. ``watch`` sends its alerts (stdout, a webhook and an Alertmanager on loopback) for a crash line that
quotes prompts; the webhook and Alertmanager URLs carry credentials, a path secret and ``?token=``, the receivers
answer 401 echoing a secret: none of them may reach stderr (``-v``).

    python bench/attack_privacy.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _attack import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
MARK = "Pz9LEAK"      # in every prompt / output
SECRET = "Sx4KEY"     # in every secret (bearer tokens, API keys, URL credentials)


def shapes(p: str) -> list[str]:
    one = p.replace("\n", " ")
    return [
        f"Received request cmpl-a1: prompt: {p!r}, params: SamplingParams(n=1, max_tokens=16), prompt_token_ids: [1, 2], lora_request: None.",
        f"Received request cmpl-a2: prompt={p!r}, params=SamplingParams(n=1)",
        f"Request cmpl-a3 details: prompt: {p!r}, prompt_token_ids: [5, 6]",
        f"Generated response cmpl-a1: output: {p!r}, output_token_ids: [1, 2], finish_reason: stop",
        f"Prompt: {one}",
        f"Output: {one}",
        f"input: {p!r}",
        f"content={p!r}",
        f"prompt: {p.encode()!r}",
        f"prompt: [{p!r}, 'x']",
        f"prompt: ({p!r},)",
        "JSON body: " + json.dumps({"prompt": p, "max_tokens": 5}),
        "error: " + json.dumps({"detail": [{"loc": ["body", "messages"], "input": p, "msg": "bad"}]}),
        json.dumps({"messages": [{"role": "user", "content": p}], "model": "m"}),
        "Value error, " + json.dumps(json.dumps({"prompt": p})),
        f"1 validation error for CompletionRequest prompt Input should be a valid string [type=string_type, input_value={p!r}, input_type=int]",
        f"messages=[{{'role': 'system', 'content': {p!r}}}], system_prompt: {p!r}",
    ]


SECRETS = [f"Authorization: Bearer {SECRET}abc123", f"{{'api_key': ['sk-{SECRET}abcdef']}}", f"hf_token={SECRET}xyz",
           f"headers: {{'authorization': 'Bearer {SECRET}q'}}", f"OPENAI_API_KEY=sk-{SECRET}abcdefgh"]
PROMPT = f"tell me\nabout 'x' \"{MARK}\" \\ ok"


def leaky_log(d: Path) -> Path:
    lines = (CORPUS / "vllm-cpu" / "01-startup-and-light-load.log").read_text().splitlines()
    env = "(APIServer pid=31488) {lvl} 11-30 02:59:5{i} [serving.py:1] {msg}"
    extra = []
    for i, s in enumerate(shapes(PROMPT) + SECRETS):
        first, *rest = s.split("\n")
        extra.append(env.format(lvl=("INFO", "WARNING", "ERROR")[i % 3], i=i % 10, msg=first))
        extra += rest  # a multi-line prompt continues on raw lines of the same record
    out = d / "leaky.log"
    out.write_text("\n".join(lines + extra) + "\n")
    return out


def crash_log(d: Path, tail: str, name: str) -> Path:
    lines = (CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log").read_text().split("\n")
    i = next(i for i, t in enumerate(lines) if "engine core exited unexpectedly" in t)
    lines[i] += " " + tail
    out = d / name
    out.write_text("\n".join(lines))
    return out


class Receiver(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        Receiver.bodies.append(self.rfile.read(n) + json.dumps(dict(self.headers)).encode())
        body = f"invalid token {SECRET}body for {self.path}".encode()
        self.send_response(401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


def main() -> int:
    bad = 0
    print(f"## attack 4: prompts and secrets through every command ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        log = leaky_log(d)
        assert MARK in log.read_text() and SECRET in log.read_text()
        html, jl = d / "report.html", d / "journeys.jsonl"
        cmds = [["parse"], ["parse", "--stats"], ["parse", "--stats", "--json"], ["parse", "-j", "2"],
                ["export"], ["export", "--to", "loki"], ["summary"], ["summary", "--json"],
                ["summary", "--journeys", str(jl)], ["timeline"], ["timeline", "--all"], ["timeline", "--json"],
                ["analyze", "-o", str(html)], ["analyze", "--json", "--no-html"], ["diagnose"], ["diagnose", "--json"],
                ["requests"], ["requests", "--json"], ["requests", "--csv"], ["capacity"], ["capacity", "--json"],
                ["series"], ["fleet", str(d)], ["fleet", str(d), "--json"]]
        leaks = []
        for c in cmds:
            args = c + ([str(log)] if c[0] != "fleet" else [])
            rc, out, err = cli(*args)
            files = b"".join(p.read_bytes() for p in (html, jl) if p.exists())
            for p in (html, jl):
                p.unlink(missing_ok=True)
            blob = out + err + files
            found = [w for w in (MARK, SECRET) if w.encode() in blob]
            tb = b"Traceback" in err
            if found or tb or rc not in (0, 1, 3):
                leaks.append(f"{' '.join(c)} (exit {rc}{', traceback' if tb else ''}: {found} "
                             f"{[ln[:160] for ln in blob.decode('utf-8', 'replace').splitlines() if MARK in ln or SECRET in ln][:2]})")
        ok = not leaks
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} default options, {len(cmds)} commands/outputs: {len(leaks)} leaking"
              + "".join(f"\n    {x}" for x in leaks), flush=True)
        shown = []
        for c in (["export"], ["parse"], ["summary", "--json"], ["analyze", "--json", "--no-html"]):
            rc, out, err = cli(*c, str(log), "--show-prompts")
            shown.append((" ".join(c), MARK.encode() in out, SECRET.encode() in out + err))
        ok = all(s and not k for _, s, k in shown)
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} --show-prompts: " + ", ".join(f"{c}: prompt {'shown' if s else 'NOT shown'}, "
              f"secret {'LEAKED' if k else 'masked'}" for c, s, k in shown), flush=True)

        # watch: alerts on stdout, to a webhook and an Alertmanager whose URLs carry secrets and that answer 401
        srv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        port = srv.server_address[1]
        hook = f"http://bot:{SECRET}pw@127.0.0.1:{port}/hooks/{SECRET}0123456789abcdef?token={SECRET}t&x=1"
        am = f"http://admin:{SECRET}am@127.0.0.1:{port}/am/?api_key={SECRET}k"
        results = []
        groups = [shapes(PROMPT.replace("\n", " "))[i:i + 4] for i in range(0, 17, 4)]
        for gi, g in enumerate(groups):
            Receiver.bodies.clear()
            clog = crash_log(d, "while serving " + " ; ".join(g) + " " + SECRETS[gi % len(SECRETS)], f"crash{gi}.log")
            rc, out, err = cli("watch", str(clog), "--listen", "off", "--exit-at-eof", "-v", "--webhook", hook,
                               "--alertmanager", am, "--webhook-token-env", "W15_TOKEN",
                               env={"W15_TOKEN": f"{SECRET}envtok"}, timeout=300)
            time.sleep(0.5)
            firing = [ln for ln in out.splitlines() if b'"firing"' in ln]
            sent = b"".join(Receiver.bodies)
            results.append({"group": gi, "exit": rc, "firing": len(firing), "posted": len(Receiver.bodies),
                            "prompt_in_stdout": MARK.encode() in out, "prompt_in_posts": MARK.encode() in sent,
                            "secret_in_stdout": SECRET.encode() in out, "secret_on_stderr": SECRET.encode() in err,
                            "traceback": b"Traceback" in err,
                            "stderr_lines": [ln[:200] for ln in err.decode("utf-8", "replace").splitlines() if SECRET in ln][:2]})
        srv.shutdown()
        ok = all(r["firing"] and r["posted"] and not (r["prompt_in_stdout"] or r["prompt_in_posts"] or r["secret_in_stdout"]
                 or r["secret_on_stderr"] or r["traceback"]) for r in results)
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} watch alerts (stdout, webhook, Alertmanager; URLs with user:password, a path "
              f"secret, ?token=, 401 answers echoing a secret; -v): " + "; ".join(
                  f"group {r['group']}: {r['firing']} firing, {r['posted']} posts, prompt leaked "
                  f"{r['prompt_in_stdout'] or r['prompt_in_posts']}, secret on stderr {r['secret_on_stderr']} {r['stderr_lines']}"
                  for r in results), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
