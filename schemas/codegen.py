"""Generate the Python protobuf modules of schemas/v1 from its .proto files.

The generated ``*_pb2.py`` / ``*_pb2.pyi`` are committed so that an install needs no protoc;
``tests/schemas/test_codegen.py`` regenerates them into a temporary folder and fails when the
committed copies are stale. Run ``python -m flowtracer.schemas.codegen`` after editing a .proto.

The .proto files are compiled as ``flowtracer/schemas/v1/<name>.proto`` so that the imports the
generated code contains (``from flowtracer.schemas.v1 import common_pb2``) resolve to the
installed package.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).parent / "v1"
IMPORT_PREFIX = Path("flowtracer/schemas/v1")


def generate(out_dir: Path) -> list[Path]:
    """Compile every .proto of schemas/v1 into ``out_dir``; return the files written."""
    from grpc_tools import protoc  # dev dependency: only needed to regenerate

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "in"
        src = root / IMPORT_PREFIX
        src.mkdir(parents=True)
        protos = sorted(PROTO_DIR.glob("*.proto"))
        for proto in protos:
            shutil.copy(proto, src / proto.name)
        gen = Path(tmp) / "out"
        gen.mkdir()
        args = ["protoc", f"-I{root}", f"--python_out={gen}", f"--pyi_out={gen}"]
        args += [str(IMPORT_PREFIX / p.name) for p in protos]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO_DIR}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for f in sorted((gen / IMPORT_PREFIX).iterdir()):
            shutil.copy(f, out_dir / f.name)
            written.append(out_dir / f.name)
        return written


def main() -> int:
    for path in generate(PROTO_DIR):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
