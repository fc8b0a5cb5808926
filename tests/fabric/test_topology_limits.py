"""Hostile or careless topology files: each is rejected by `flowtracer topology check` with exit 2 and one line
naming the file, the line and the problem, and none of them can crash or exhaust the loader."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowtracer.plumbing.config_yaml import MAX_BYTES, MAX_DEPTH

GOOD = (Path(__file__).parent / "tiny_topology.yaml").read_text()


def alias_bomb() -> str:
    """About 1 KB of YAML whose aliases expand to 9**9 (387 million) nodes."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    return "\n".join(lines) + "\n" + GOOD


CASES = [
    ("a top-level key given twice", GOOD + "hosts:\n  - name: h3\n    nics: []\n",
     r":19: duplicate key 'hosts' \(first at line 14\)$"),
    ("a host name ending in a newline", GOOD.replace("- name: h2", '- name: "h2\\n"'),
     r"hosts\[1\]\.name: 'h2\\n' is not a valid host name"),
    ("a switch name ending in a newline", GOOD.replace("{name: leaf2,", '{name: "leaf2\\n",'),
     r"switches\[1\]\.name: 'leaf2\\n' is not a valid switch name"),
    ("a 100,000-character host name", GOOD.replace("- name: h2", "- name: " + "h" * 100_000),
     r"hosts\[1\]\.name: 'h{100000}' is not a valid host name \(up to 128"),
    ("a 40,000-deep nested list", "x: " + "[" * 40_000 + "]" * 40_000 + "\n" + GOOD,
     # libyaml's own limit (1,000) or ours, whichever the parser reaches first
     rf":1(:\d+)?: (nested deeper than {MAX_DEPTH} levels|YAML syntax error: exceeded maximum nesting depth)$"),
    ("a 100-deep nested block mapping", "x:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(100)) + GOOD,
     rf":\d+: nested deeper than {MAX_DEPTH} levels$"),
    ("a 1 KB alias bomb", alias_bomb(), r":\d+: expands to more than 2,000,000 nodes \(YAML aliases\)"),
    ("a file larger than the limit", "# " + "x" * MAX_BYTES + "\n" + GOOD, r": \d+ characters is too large"),
]


@pytest.mark.parametrize(("case", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_topology_check_rejects_with_one_line_and_exit_2(tmp_path: Path, case: str, text: str,
                                                        expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    run = subprocess.run([sys.executable, "-m", "flowtracer", "topology", "check", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, (case, run.returncode, run.stderr[-500:])
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr[-2000:]
    assert lines[0].startswith(f"invalid topology: {bad}")
    assert re.search(expected, lines[0]), lines[0][:300]


def test_the_good_file_still_loads(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    run = subprocess.run([sys.executable, "-m", "flowtracer", "topology", "check", str(good)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
