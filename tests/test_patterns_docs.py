"""Every kind and field is documented; docs/kinds.md is generated from the registry and up to date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vllmlog.parsing.catalog import BUILTIN_KINDS, COMMON_FIELDS, catalog, markdown
from vllmlog.parsing.fields import FIELDS
from vllmlog.reader import parse

from .conftest import corpus_logs

DOC = Path(__file__).parent.parent / "docs" / "kinds.md"


def test_every_kind_and_field_documented():
    cat = catalog()
    assert {k["kind"] for k in cat} >= set(BUILTIN_KINDS)
    for k in cat:
        assert k["doc"], k["kind"]
        for f in k["fields"]:
            assert f["type"] != "undocumented", f"{k['kind']}: field {f['name']} is not in parsing/fields.py"
            assert f["meaning"], f"{k['kind']}.{f['name']}"
    for f in COMMON_FIELDS:
        assert f in FIELDS


def test_generated_doc_is_current():
    assert DOC.exists(), "run: vllmlog kinds --markdown > docs/kinds.md"
    assert DOC.read_text(encoding="utf-8") == markdown(), "docs/kinds.md is stale: run `vllmlog kinds --markdown > docs/kinds.md`"


def test_corpus_fields_are_documented():
    cat = {k["kind"]: k for k in catalog()}
    for path in corpus_logs():
        for e in parse(str(path), year=2026, keep_text=False):
            k = cat.get(e.kind)
            assert k is not None, f"kind {e.kind} missing from the catalogue"
            if k["dynamic_fields"]:
                continue
            for name in e.fields:
                assert name in FIELDS or name.startswith("_"), f"{path.name}:{e.line} {e.kind}.{name} undocumented"


def test_kinds_cli_json():
    import orjson

    r = subprocess.run([sys.executable, "-m", "vllmlog", "kinds", "--json"], capture_output=True, timeout=60)
    assert r.returncode == 0
    data = orjson.loads(r.stdout)
    assert any(k["kind"] == "decode_step" for k in data)
    r = subprocess.run([sys.executable, "-m", "vllmlog", "kinds", "no_such_kind"], capture_output=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith(b"error: ")
