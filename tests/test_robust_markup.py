"""Issue 15 §4: log text is text, never Rich markup. Clients choose request ids (``X-Request-Id``), so a
request id, a warning, an unparsed line or a path may hold ``[/]`` (a MarkupError crashed ``summary`` and
``requests``) or ``[link=https://…]`` (a live terminal hyperlink). Every console the CLI builds has markup
off; the few styled messages pass ``markup=True`` and escape what they interpolate.

Each command runs on a log full of hostile markup with a forced colour terminal: exit 0/1, no traceback,
no OSC 8 hyperlink escape, the hostile text shown as text, and none of our own style tags leaking."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmlog.cli import main

from .conftest import CORPUS

LIGHT = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"
HOSTILE_ID = "[/]-[link=https://evil.example/]x[/link]-[blink]"
OSC8 = "\x1b]8;"


def _hostile_log(tmp_path: Path) -> Path:
    text = LIGHT.read_text().replace("cmpl-client-0000-f7697fb9", "cmpl-" + HOSTILE_ID)
    extra = [
        "(APIServer pid=31488) WARNING 11-30 02:59:55 [serving.py:1] odd [/] thing [link=https://evil.example/]click[/link]",
        "(APIServer pid=31488) ERROR 11-30 02:59:56 [serving.py:2] Error in request [/]: [link=https://evil.example/]x[/link] [reverse]",
        "something unparsed [/] [link=https://evil.example/]y[/link]",
    ]
    p = tmp_path / "[reverse]log[blink].log"  # a path is printed too
    p.write_text(text + "\n".join(extra) + "\n")
    assert "cmpl-" + HOSTILE_ID in p.read_text()
    return p


CMDS = [["summary"], ["requests"], ["timeline"], ["diagnose"], ["analyze", "--no-html"], ["parse", "--stats"],
        ["requests", "--format", "csv"], ["capacity"], ["series"]]


@pytest.mark.parametrize("cmd", CMDS, ids=[" ".join(c) for c in CMDS])
def test_hostile_markup_is_text(tmp_path: Path, cmd: list[str], capfd, monkeypatch) -> None:
    log = _hostile_log(tmp_path)
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal: hyperlinks and styles would be live
    monkeypatch.setenv("COLUMNS", "200")
    rc = main(cmd + [str(log)])
    out, err = capfd.readouterr()
    assert rc in (0, 1), (rc, err[-3000:])
    assert "Traceback" not in err and "MarkupError" not in err, err[-3000:]
    assert OSC8 not in out and OSC8 not in err
    for tag in ("[bold]", "[dim]", "[green]", "[yellow]", "[red]", "[bold yellow]"):  # our own styles still styles
        assert tag not in out and tag not in err, tag
    if cmd[0] in ("requests",):
        assert "[link=https://evil.example/]x[/link]" in out  # the id, as the client sent it


def test_parse_summary_on_plain_log_still_styled(tmp_path: Path, capfd, monkeypatch) -> None:
    """Markup off does not lose our own emphasis: a forced terminal still gets bold."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["summary", str(LIGHT)]) == 0
    out = capfd.readouterr().out
    assert "\x1b[1mTime range" in out and "[bold]" not in out
