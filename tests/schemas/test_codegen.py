"""The committed *_pb2 modules are exactly what the pinned protoc makes of the committed .proto files."""

from __future__ import annotations

from pathlib import Path

from flowtracer.schemas import codegen


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    written = codegen.generate(tmp_path)
    assert written, "no .proto compiled"
    stale = [p.name for p in written if p.read_bytes() != (codegen.PROTO_DIR / p.name).read_bytes()]
    assert not stale, f"stale generated code, run `python -m flowtracer.schemas.codegen`: {stale}"
    committed = {p.name for p in codegen.PROTO_DIR.glob("*_pb2.py*")}
    assert committed == {p.name for p in written}, "generated files without a .proto (or the reverse)"
