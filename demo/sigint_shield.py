"""LocalPipeline for an interactive demo: the terminal's Ctrl-C must reach the demo, not the broker.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group. The stages run in their
own sessions (LocalPipeline), but the embedded Tansu broker is a plain child of the demo: it would
die at once, and the stages, which flush into it while they stop, would hang until killed. So the
broker is started with SIGINT blocked (the mask is inherited across fork and exec, and Tansu never
unblocks it; LocalPipeline stops it with SIGTERM), while the stages get SIGINT unblocked, since that
is how LocalPipeline asks them to stop cleanly.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator, Sequence

from flowtracer.demo.local_pipeline import LocalPipeline, Stage


@contextlib.contextmanager
def broker_shielded_from_ctrl_c() -> Iterator[None]:
    """Block SIGINT in this thread while the pipeline starts; a Ctrl-C meanwhile is delivered when the block ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class DemoPipeline(LocalPipeline):
    """LocalPipeline whose stages are spawned with SIGINT unblocked, even inside :func:`broker_shielded_from_ctrl_c`."""

    def _spawn(self, name: str, args: Sequence[str]) -> Stage:
        old = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        try:
            return super()._spawn(name, args)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
