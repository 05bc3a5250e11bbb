"""Issue 15, judged attack 3: hostile Rich markup in request ids and messages through every command.

Request ids (clients choose them: ``X-Request-Id``), warnings, errors, unparsed lines and the file name hold
``[/]``, ``[link=https://evil.example/]…[/link]``, ``[bold]``, ``[blink]``. Each command runs with a forced colour
terminal (``FORCE_COLOR=1``, so Rich would emit hyperlinks and styles): PASS when no command crashes (traceback,
``MarkupError``, exit other than 0/1/3) and no output holds an OSC 8 hyperlink escape (``ESC ] 8 ;``); the hostile
id must be printed as text where ids are listed.

    python bench/attack_markup.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _attack import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
HOSTILE = "[/]-[link=https://evil.example/]x[/link]-[bold]-[blink]"
OSC8 = b"\x1b]8;"


def hostile_log(d: Path) -> Path:
    text = (CORPUS / "vllm-cpu" / "01-startup-and-light-load.log").read_text()
    text = text.replace("cmpl-client-0000-f7697fb9", "cmpl-" + HOSTILE).replace("chatcmpl-client-0001-c735df5e",
                                                                                  "chatcmpl-[/]" + HOSTILE)
    extra = [
        "(APIServer pid=31488) WARNING 11-30 02:59:55 [serving.py:1] odd [/] thing [link=https://evil.example/]click[/link] [bold]",
        "(APIServer pid=31488) ERROR 11-30 02:59:56 [serving.py:2] Error in request [/]: [link=https://evil.example/]x[/link] [reverse]",
        "(APIServer pid=31488) ERROR 11-30 02:59:57 [engine.py:3] EngineCore encountered a fatal error [/bold] [link=https://e/]",
        "something unparsed [/] [link=https://evil.example/]y[/link] [bold]",
        "\x1b]8;;https://evil.example/\x1b\\raw osc8 in the log\x1b]8;;\x1b\\",
    ]
    p = d / "[bold]log[link=https:evil.example][blink].log"  # ("/" cannot be in a file name)
    p.write_text(text + "\n".join(extra) + "\n")
    return p


def main() -> int:
    print(f"## attack 3: hostile markup ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    env = {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    fails = []
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        log = hostile_log(d)
        cmds = [["summary"], ["requests"], ["requests", "--csv"], ["requests", "--json"], ["diagnose"], ["timeline"],
                ["timeline", "--all"], ["analyze", "--no-html"], ["analyze", "-o", str(d / "r.html")],
                ["summary", "--journeys", str(d / "j.jsonl")], ["parse"], ["parse", "--stats"], ["capacity"],
                ["series"], ["export"], ["fleet", str(d)]]
        ran = 0
        for c in cmds:
            rc, out, err = cli(*(c + ([str(log)] if c[0] != "fleet" else [])), env=env)
            ran += 1
            bad = []
            if rc not in (0, 1, 3):
                bad.append(f"exit {rc}")
            if b"Traceback" in err or b"MarkupError" in err:
                bad.append("traceback")
            if OSC8 in out or OSC8 in err:
                bad.append("OSC 8 hyperlink")
            if c[0] == "requests" and len(c) == 1 and b"[link=https://evil.example/]" not in out:
                bad.append("hostile id not shown as text")
            if bad:
                fails.append(f"{' '.join(c)}: {', '.join(bad)} {err.decode('utf-8', 'replace')[-200:]!r}")
        # watch: its stdout alerts and stderr, on the same log with a crash quoting markup
        crash = (CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log").read_text().replace(
            "engine core exited unexpectedly", "engine core exited unexpectedly [/] [link=https://evil.example/]x[/link]")
        cl = d / "crash[bold].log"
        cl.write_text(crash)
        for lg in (log, cl):
            rc, out, err = cli("watch", str(lg), "--listen", "off", "--exit-at-eof", "-v", env=env, timeout=300)
            ran += 1
            if rc not in (0, 1, 3) or b"Traceback" in err or OSC8 in out or OSC8 in err:
                fails.append(f"watch {lg.name}: exit {rc} {err.decode('utf-8', 'replace')[-300:]!r}")
    ok = not fails
    print(f"{'PASS' if ok else 'FAIL'} {ran} runs with FORCE_COLOR=1: {len(fails)} failing" + "".join(f"\n    {f}" for f in fails))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
