"""The worker's web server: only flowtracer's own views, bound where flowtracer's settings say.

Faust reads its settings from the environment too, and the environment wins over the arguments: ``WEB_BIND=0.0.0.0``
(the library's own default when nothing says otherwise), ``WEB_PORT``, ``WEB_TRANSPORT``, ``APP_WEB_ENABLED`` or
``APP_WEB_TABLES_ENABLED`` in a pod or a shell would put the worker's web server on every address with Faust's
``/table`` (reads any key of the stage-state tables), ``/router`` (the cluster's worker URLs) and ``/`` views,
whatever ``ProcessorConfig`` says. So the app is given an empty environment for its settings (every setting
flowtracer uses is passed explicitly, ``app.py``) and a web driver without Faust's built-in blueprints: what it
serves is what flowtracer registers (the dashboard, ``dashboard/server.py``), on ``web_bind:web_port`` over TCP.
"""

from __future__ import annotations

from typing import Any, ClassVar

from faust.web.drivers import DRIVERS
from faust.web.drivers.aiohttp import Web

DRIVER = "flowtracer-web"
"""The URL scheme under which Faust's driver registry finds :class:`OwnViewsOnly` (its ``web`` setting is a URL)."""


class OwnViewsOnly(Web):  # type: ignore[misc]
    """Faust's aiohttp web driver without its built-in views (index, stats, graph, tables, router, performance)."""

    default_blueprints: ClassVar[list[Any]] = []
    production_blueprints: ClassVar[list[Any]] = []
    debug_blueprints: ClassVar[list[Any]] = []
    optional_blueprints: ClassVar[list[Any]] = []


def web_settings(web_port: int, web_bind: str) -> dict[str, Any]:
    """Faust settings for the worker's web server: enabled when ``web_port`` > 0, on ``web_bind`` (an address),
    flowtracer's views only, and no setting taken from the environment (``env``: the module docstring)."""
    DRIVERS.aliases[DRIVER] = f"{__name__}:{OwnViewsOnly.__name__}"
    return {
        "env": {},
        "web": f"{DRIVER}://",
        "web_enabled": web_port > 0,
        "web_port": web_port or 6066,
        "web_bind": web_bind,
        "web_host": web_bind,
        "web_transport": "tcp://",
        "web_in_thread": False,
        "web_stats_enabled": False,
        "web_graph_enabled": False,
        "web_router_enabled": False,
        "web_tables_enabled": False,
        "web_metrics_enabled": False,
    }
