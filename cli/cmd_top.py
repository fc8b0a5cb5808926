"""``flowtracer top``: the demo's live terminal view of any running deployment, read from its output topics.

Read-only: a kafka-python consumer assigned to the output topics' partitions, no consumer group, nothing
committed, nothing produced (demo/status.py's ``OutputWatcher``). It folds the records into the same state the demo
does and draws the same view (demo/view_state.py, demo/view_render.py): redrawn in place on a terminal, compact
lines of what changed otherwise. Open incidents are those ``flowtracer diagnose`` publishes. docs/operations.md.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import click

from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, exit_with
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.logs import json_logs_requested
from flowtracer.plumbing.kafka_security import kafka_python_kwargs

PROG = "flowtracer top"


@click.command("top")
@click.option("--kafka", required=True, help="Kafka bootstrap servers host:port[,host:port].")
@click.option("--topology", type=click.Path(path_type=Path), required=True,
              help="Fabric topology YAML (which links join two switches, which switches should report).")
@click.option("--every", "every_s", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Seconds between redraws (a terminal) or checks for changes to print (otherwise).")
@click.option("--since", "since_s", type=click.FloatRange(min=0.0), default=60.0, show_default=True,
              help="Start with the records of the last this many seconds (the sparkline's minute).")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="Stop after this many seconds (default: until Ctrl-C).")
@kafka_config_option
def top(kafka: str, topology: Path, every_s: float, since_s: float, duration_s: float | None,
        kafka_config: Path | None = None) -> None:
    """A live view of a running deployment: fabric FIM and its sparkline, collisions, open incidents, health.

    Reads the processor's output topics (and flowtracer diagnose's incidents) without a consumer group, so it
    commits nothing and any number can watch. On a terminal one screen is redrawn in place; piped, only the
    lines of what changed are printed.
    """
    from flowtracer.demo.live_view import LiveView, redraws
    from flowtracer.demo.status import Observed, OutputWatcher
    from flowtracer.demo.view_state import view_state

    try:
        topo = load_topology(topology)
    except TopologyError as e:
        exit_with(PROG, EXIT_BAD_INPUT, f"invalid topology: {e}")
    security = kafka_security_or_exit(kafka_config, PROG, bootstrap=kafka)
    observed = Observed(switch_names=frozenset(s.name for s in topo.switches))
    watcher = OutputWatcher(kafka, observed, client_config=kafka_python_kwargs(security), since_s=since_s,
                            client_id="flowtracer-top")
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    out = click.get_text_stream("stdout")
    view = LiveView(out, live=redraws(out, json_logs_requested()))
    view.message(f"flowtracer top: {kafka}, fabric {topo.name} ({len(topo.switches)} switches); Ctrl-C stops")
    watcher.start()
    t0 = time.monotonic()
    failure = None
    try:
        while not stop.is_set():
            if not watcher.is_alive():
                failure = watcher.error or "the output watcher stopped"
                break
            with watcher.lock:
                frame = view_state(watcher.observed, f"flowtracer top: {kafka}", time.strftime("%H:%M:%S"),
                                   error=watcher.error)
            view.show(frame)
            if duration_s is not None and time.monotonic() - t0 >= duration_s:
                break
            stop.wait(every_s)
    finally:
        view.close()
        watcher.stop()
    if failure:
        click.echo(f"{PROG}: {failure}", err=True)
        sys.exit(EXIT_FAILURE)
