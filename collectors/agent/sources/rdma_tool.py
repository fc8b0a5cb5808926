"""Runs iproute2's ``rdma`` tool with a timeout and turns its failures into clear errors.

``rdma -j resource show qp`` and ``rdma -j statistic qp show`` need no privilege (the kernel shows
the QPs of the caller's pid namespace). The command prefix is configurable (``["rdma"]``, or e.g.
``["nsenter", "-t", "1", "-n", "rdma"]`` for a container), so this module never guesses a path.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class RdmaToolError(RuntimeError):
    """The rdma tool failed; ``str()`` says what, for a person."""


class RdmaUnavailable(RdmaToolError):
    """No usable RDMA on this host: the tool is missing or the kernel has no RDMA netlink/devices."""


def run_rdma(command: Sequence[str], args: Sequence[str], timeout_s: float = 5.0) -> bytes:
    """Run ``command -j args...`` and return its stdout (JSON text).

    Raises ``RdmaUnavailable`` when the program is missing or not executable, or the kernel has no
    RDMA netlink (``Failed to open NETLINK_RDMA socket``), and ``RdmaToolError`` for a timeout or
    any other non-zero exit (with the tool's stderr).
    """
    argv = [*command, "-j", *args]
    shown = " ".join(argv)
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise RdmaUnavailable(
            f"cannot run {command[0]!r}: not found. Install iproute2 (it provides 'rdma'), set the command "
            f"with --rdma-command, or run with --sysfs-only for port totals without flows") from None
    except PermissionError:
        raise RdmaUnavailable(f"cannot run {command[0]!r}: permission denied") from None
    except subprocess.TimeoutExpired:
        raise RdmaToolError(f"'{shown}' did not finish within {timeout_s:g} s") from None
    except OSError as e:
        raise RdmaUnavailable(f"cannot run {command[0]!r}: {e.strerror or e}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
        if "NETLINK_RDMA" in err:
            raise RdmaUnavailable(
                f"'{shown}' failed: {err}: this kernel has no RDMA support loaded (no ib_core / RDMA "
                f"devices); run with --sysfs-only, or on a host with RDMA NICs")
        raise RdmaToolError(f"'{shown}' failed: {err}")
    return proc.stdout
