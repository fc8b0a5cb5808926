"""The processor installs and runs without the what-if tool's optional dependency (matplotlib)."""

from __future__ import annotations

import subprocess
import sys

BLOCK_AND_IMPORT = """
import importlib, pkgutil, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("matplotlib is blocked in this test")
        return None

sys.meta_path.insert(0, Block())
import flowtracer.stream
for m in pkgutil.walk_packages(flowtracer.stream.__path__, "flowtracer.stream."):
    importlib.import_module(m.name)
from flowtracer.main import main
sys.argv = ["flowtracer", "process", "--help"]
try:
    main()
except SystemExit as e:
    assert e.code in (0, None), e.code
assert "matplotlib" not in sys.modules
print("ok")
"""


def test_every_processor_module_and_the_process_command_work_without_matplotlib() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_AND_IMPORT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
