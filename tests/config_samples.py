"""Test helper: the commented component samples under deploy/config/, and spoiled copies of them."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "config"
"""deploy/config/: ``<component>.yaml`` for collector, agent, processor and diagnose."""


def spoiled(component: str, line: str, replacement: str, out: Path) -> tuple[Path, int]:
    """A copy of *component*'s sample at *out* with its one line that starts with *line* (indentation included)
    replaced by *replacement*; (the copy, that line's number)."""
    lines = (SAMPLES / f"{component}.yaml").read_text().splitlines(keepends=True)
    (n,) = [i for i, text in enumerate(lines) if text.startswith(line)]
    lines[n] = replacement + "\n"
    out.write_text("".join(lines))
    return out, n + 1
