"""Logging set-up for every command: level and format (text for people, JSON for collectors)."""

from __future__ import annotations

import json
import logging
import sys
import time

from flowtracer.plumbing.log_rate_limit import RepeatFilter

FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (RFC 3339, UTC), level, logger, msg, and any ``extra`` fields."""

    _std = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        out = {"ts": ts, "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        out.update({k: v for k, v in record.__dict__.items() if k not in self._std and not k.startswith("_")})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str = "info", fmt: str = "text") -> None:
    """Log to stderr (stdout carries command output such as generated topologies or ready JSON)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    # A broker outage makes the Kafka clients repeat the same lines ~100 times a second: rate-limit them.
    handler.addFilter(RepeatFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Third-party clients are chatty at INFO; their warnings still show.
    for noisy in ("kafka", "aiokafka", "faust", "mode", "urllib3", "influxdb_client"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def json_logs_requested() -> bool:
    """Whether the command line asked for ``--log-format json`` (a log shipper reads this process: a live view
    then writes lines, never a redrawn screen)."""
    import click

    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("log_format") == "json")
