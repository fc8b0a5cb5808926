"""Runs iproute2's ``rdma`` tool with a timeout and turns its failures into clear errors.

``rdma -j resource show qp`` and ``rdma -j statistic qp show`` need no privilege (the kernel shows
the QPs of the caller's pid namespace). The command prefix is configurable (``["rdma"]``, or e.g.
``["nsenter", "-t", "1", "-n", "rdma"]`` for a container), so this module never guesses a path.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowtracer.collectors.agent.sources.program import ProgramError, run_program


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
    try:
        return run_program(argv, timeout_s)
    except ProgramError as e:
        if e.not_found:
            raise RdmaUnavailable(
                f"{e}. Install iproute2 (it provides 'rdma'), set the command with --rdma-command, or run with "
                f"--sysfs-only for port totals without flows") from None
        if e.missing:
            raise RdmaUnavailable(str(e)) from None
        if "NETLINK_RDMA" in e.stderr:
            raise RdmaUnavailable(
                f"{e}: this kernel has no RDMA support loaded (no ib_core / RDMA "
                f"devices); run with --sysfs-only, or on a host with RDMA NICs") from None
        raise RdmaToolError(str(e)) from None
