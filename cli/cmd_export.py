"""``flowtracer export``: save recorded traffic from Kafka to a file that ``flowtracer whatif --input`` replays.

The file is the versioned JSON-lines format of ``flowtracer.whatif.record`` (format
``flowtracer-recording``, version 1): a header line, then one line per FlowBatch, LinkLoad,
PathLoad and FimSample whose window ends in the range. docs/whatif.md describes it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from flowtracer.exit_codes import EXIT_FAILURE
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.kafka_security import kafka_python_kwargs
from flowtracer.whatif.record import Recording, parse_instant, parse_span, write_export


class _Converted(click.ParamType):
    def __init__(self, fn: Callable[[str], int], name: str) -> None:
        self.fn = fn
        self.name = name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        try:
            return self.fn(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


INSTANT = _Converted(parse_instant, "TIME")
SPAN = _Converted(parse_span, "DURATION")


def range_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--from, --to and --last, shared by export and whatif."""
    f = click.option("--last", "last_ns", type=SPAN, default=None,
                     help="Only the last DURATION before the newest window (e.g. 60s), after --from/--to.")(f)
    f = click.option("--to", "to_ns", type=INSTANT, default=None,
                     help="Windows ending at or before TIME (ISO 8601, or epoch s or ns).")(f)
    f = click.option("--from", "from_ns", type=INSTANT, default=None,
                     help="Windows ending after TIME (ISO 8601, or epoch s or ns).")(f)
    return f


def narrow(rec: Recording, from_ns: int | None, to_ns: int | None, last_ns: int | None) -> Recording:
    """Apply --from/--to, then --last relative to the newest flow window left."""
    rec = rec.select(from_ns, to_ns)
    ends = rec.window_ends()
    if last_ns is not None and ends:
        rec = rec.select(ends[-1] - last_ns, None)
    return rec


def read_range(kafka: str, from_ns: int | None, to_ns: int | None, last_ns: int | None, idle_s: float,
               outputs: bool = True, prog: str = "flowtracer export", kafka_config: Path | None = None) -> Recording:
    """Read the range from Kafka; exits 1 with one line when the broker cannot be read (2 when the
    ``--kafka-config`` settings are invalid)."""
    from flowtracer.whatif.kafka_reader import read_kafka

    client_config = kafka_python_kwargs(kafka_security_or_exit(kafka_config, prog, bootstrap=kafka))
    try:
        rec = read_kafka(kafka, from_ns, to_ns, idle_s=idle_s, include_outputs=outputs, client_config=client_config)
    except Exception as e:  # kafka-python raises many types; the user needs the one line, not the trace
        click.echo(f"{prog}: cannot read from Kafka at {kafka}: {type(e).__name__}: {e}", err=True)
        sys.exit(EXIT_FAILURE)
    return narrow(rec, None, None, last_ns)


@click.command("export")
@click.option("--kafka", required=True, metavar="HOST:PORT", help="Kafka bootstrap servers host:port[,host:port].")
@range_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write [default: stdout].")
@click.option("--flows-only", is_flag=True, help="Only the flow topic, not the processor's outputs.")
@click.option("--idle", "idle_s", type=float, default=3.0, show_default=True,
              help="Stop reading after the broker has had nothing new for this many seconds.")
@kafka_config_option
def export(kafka: str, from_ns: int | None, to_ns: int | None, last_ns: int | None, output: Path | None,
           flows_only: bool, idle_s: float, kafka_config: Path | None) -> None:
    """Save recorded flows (and what the processor measured) to a what-if recording file.

    Reads flowtracer.flows.v1 and, unless --flows-only, flowtracer.link-loads.v1, path-loads.v1 and fim.v1,
    keeping records whose window ends in the range; writes JSON lines (docs/whatif.md).
    """
    rec = read_range(kafka, from_ns, to_ns, last_ns, idle_s, outputs=not flows_only, kafka_config=kafka_config)
    if not rec.flow_batches:
        click.echo(f"flowtracer export: no flow records in the range on {kafka}", err=True)
    if output is None:
        n = write_export(rec, sys.stdout, from_ns, to_ns)
    else:
        try:
            with output.open("w", encoding="utf-8") as fh:
                n = write_export(rec, fh, from_ns, to_ns)
        except OSError as e:
            click.echo(f"flowtracer export: cannot write {output}: {e.strerror or e}", err=True)
            sys.exit(EXIT_FAILURE)
        counts = ", ".join(f"{v} {k}" for k, v in rec.counts().items())
        click.echo(f"wrote {output}: {n} lines ({counts})", err=True)
