"""``flowtracer path``: where given flows go, hop by hop, read from the processor's flow-paths topic.

Read-only like ``flowtracer top``: demo/status.py's ``OutputWatcher`` (kafka-python, partitions assigned, no
consumer group, nothing committed) folds the compacted flow-paths topic from its beginning and the newest link loads
into a ``FlowPathTable`` (demo/flow_path_table.py); selection and formatting are demo/path_query.py. The snapshot is
printed once the topic has been read to its end (every partition fetched and none behind, by the fetches' high
watermarks: the embedded broker's ListOffsets cannot be trusted, DEVELOPERS.md); ``--follow`` then prints each change
as it arrives. docs/operations.md.
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
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.kafka_security import kafka_python_kwargs
from flowtracer.schemas import topics

PROG = "flowtracer path"
LINK_LOADS_SINCE_S = 10.0
"""Link loads are read from this many seconds back: each link's newest utilization is all a hop shows."""


@click.command("path")
@click.option("--kafka", required=True, help="Kafka bootstrap servers host:port[,host:port].")
@click.option("--flow", "flow_text", default=None, metavar="SRC_IP,DST_IP[,UDP_SRC_PORT]",
              help="Flows with this 5-tuple (RoCEv2: UDP to 4791).")
@click.option("--host", default=None, help="Flows sent or received by this host.")
@click.option("--nic", default=None, metavar="HOST:RDMA_DEVICE", help="Flows sent or received by this NIC.")
@click.option("--job", default=None, help="Flows of this scheduler job id.")
@click.option("--comm", default=None, metavar="COMM_ID", help="Flows of this NCCL communicator (hex id).")
@click.option("--follow", is_flag=True, help="After the current paths, print each change as it happens (Ctrl-C stops).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Traceroute-style text, or JSON (a list; with --follow one object per line: each current flow, "
                   "then each change).")
@click.option("--max-wait", "max_wait_s", type=click.FloatRange(min=1.0), default=60.0, show_default=True,
              help="Print what was read after at most this many seconds even if the topic was not read to its end.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="With --follow: stop after this many seconds (default: until Ctrl-C).")
@kafka_config_option
def path(kafka: str, flow_text: str | None, host: str | None, nic: str | None, job: str | None, comm: str | None,
         follow: bool, fmt: str, max_wait_s: float, duration_s: float | None,
         kafka_config: Path | None = None) -> None:
    """Where flows go: the hops of the flows selected by 5-tuple, host, NIC, job or communicator (all given must
    match; none: every flow), each hop with its link's utilization and a * where the flow shares the link with
    another heavy flow. Reads the flow-paths topic without a consumer group: commits nothing."""
    from flowtracer.demo.flow_path_table import FlowPathTable
    from flowtracer.demo.path_query import QueryError, Selection, change_text, parse_flow, render, select
    from flowtracer.demo.status import OutputWatcher

    try:
        src, dst, sport = parse_flow(flow_text) if flow_text else (None, None, None)
    except QueryError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    sel = Selection(src, dst, sport, host, nic, job, comm)
    security = kafka_security_or_exit(kafka_config, PROG, bootstrap=kafka)
    table = FlowPathTable()
    watcher = OutputWatcher(kafka, table, client_config=kafka_python_kwargs(security), since_s=LINK_LOADS_SINCE_S,
                            client_id="flowtracer-path", whole=frozenset({topics.FLOW_PATHS.name}))
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    watcher.start()
    t0 = time.monotonic()
    failure = None
    try:
        # Read to the end first: every partition fetched and none behind (a live topic never goes quiet).
        while not stop.is_set() and time.monotonic() - t0 < max_wait_s:
            if not watcher.is_alive():
                failure = watcher.error or "the reader stopped"
                break
            if watcher.caught_up:
                break
            stop.wait(0.1)
        if failure is None:
            with watcher.lock:
                flows = select(table, sel)
                if follow and fmt == "json":  # one object per line throughout, the current ones first
                    text = "\n".join(change_text(table, m, fmt) for m in flows)
                else:
                    text = render(table, flows, fmt)
                seen = table.sequence
            if text:
                click.echo(text)
            while follow and not stop.is_set() and failure is None:
                if duration_s is not None and time.monotonic() - t0 >= duration_s:
                    break
                if not watcher.is_alive():
                    failure = watcher.error or "the reader stopped"
                    break
                with watcher.lock:
                    news = [m for n, m in table.changes if n > seen and sel.matches(m)]
                    seen = table.sequence
                    lines = [change_text(table, m, fmt) for m in news]
                for line in lines:
                    click.echo(line)
                sys.stdout.flush()
                stop.wait(0.2)
    finally:
        watcher.stop()
    if failure:
        click.echo(f"{PROG}: {failure}", err=True)
        sys.exit(EXIT_FAILURE)
