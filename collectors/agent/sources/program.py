"""Runs a helper program (``rdma``, ``ethtool``) with a timeout; every way it can fail is one ``ProgramError``."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class ProgramError(RuntimeError):
    """The program could not run (``missing``: not found, not executable, OS error), timed out, or exited non-zero
    (``stderr``: what it said). ``str()`` says which, for a person."""

    def __init__(self, message: str, *, missing: bool = False, not_found: bool = False, stderr: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.not_found = not_found
        self.stderr = stderr


def run_program(argv: Sequence[str], timeout_s: float) -> bytes:
    """Run ``argv`` (stdin closed) and return its stdout; ProgramError on any failure."""
    shown = " ".join(argv)
    try:
        proc = subprocess.run(list(argv), capture_output=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ProgramError(f"cannot run {argv[0]!r}: not found", missing=True, not_found=True) from None
    except PermissionError:
        raise ProgramError(f"cannot run {argv[0]!r}: permission denied", missing=True) from None
    except subprocess.TimeoutExpired:
        raise ProgramError(f"'{shown}' did not finish within {timeout_s:g} s") from None
    except OSError as e:
        raise ProgramError(f"cannot run {argv[0]!r}: {e.strerror or e}", missing=True) from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
        raise ProgramError(f"'{shown}' failed: {err}", stderr=err)
    return proc.stdout
