"""stream/runtime/web.py: the worker's web server listens where ProcessorConfig says, whatever Faust's environment
says, and serves flowtracer's views only (a real Faust app, its real aiohttp server, the kernel's socket table)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from flowtracer.embedded.managed_process import free_port
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.dashboard.server import register_dashboard
from flowtracer.stream.runtime.app import build_app
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.sinks.registry import make_sink

HOSTILE = {"WEB_BIND": "0.0.0.0", "F_WEB_BIND": "0.0.0.0", "WEB_HOST": "0.0.0.0", "WEB_PORT": "6066",
           "WEB_TRANSPORT": "unix:///tmp/faust.sock", "APP_WEB_ENABLED": "true", "APP_WEB_TABLES_ENABLED": "true",
           "APP_WEB_ROUTER_ENABLED": "true", "APP_WEB_STATS_ENABLED": "true", "APP_WEB_GRAPH_ENABLED": "true",
           "APP_WEB_METRICS_ENABLED": "true", "APP_DEBUG": "true"}
"""What a pod's or shell's environment could say to Faust (before: it won over flowtracer's settings)."""


def listeners(port: int) -> set[str]:
    """Local addresses (hex, as the kernel shows them) of the TCP sockets listening on ``port``."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            addr, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # LISTEN
                out.add(addr)
    return out


def test_the_web_server_binds_to_the_configured_address_and_serves_only_flowtracers_views(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in HOSTILE.items():
        monkeypatch.setenv(name, value)
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="web4")))
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    port = free_port()
    cfg = ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=2, web_port=port, data_dir=tmp_path)
    app, proc = build_app(cfg, make_sink("none", {}), lambda e: [], fabric)
    register_dashboard(app, proc)
    conf = app.conf
    assert (conf.web_enabled, conf.web_bind, conf.web_port, conf.web_transport.scheme) == (True, "127.0.0.1", port,
                                                                                           "tcp")
    assert not (conf.web_tables_enabled or conf.web_router_enabled or conf.web_stats_enabled
                or conf.web_graph_enabled or conf.web_metrics_enabled)

    async def serve() -> tuple[set[str], dict[str, int]]:
        app.web.init_server()
        await app.web.start_server()
        try:
            bound = listeners(port)
            status = {}
            async with aiohttp.ClientSession() as session:
                for path in ("/", "/table/", "/table/flowtracer-stage-state/", "/router/", "/graph/", "/stats/",
                             "/performance/", "/dashboard/"):
                    async with session.get(f"http://127.0.0.1:{port}{path}") as r:
                        status[path] = r.status
            return bound, status
        finally:
            await app.web.stop_server()

    bound, status = asyncio.run(serve())
    assert bound == {"0100007F"}, f"listening on {bound}: 0100007F is 127.0.0.1, and nothing else"
    assert status.pop("/dashboard/") == 200
    assert set(status.values()) == {404}, f"Faust's own views are off: {status}"
    assert listeners(port) == set()
