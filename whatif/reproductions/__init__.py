"""The paper reproductions on top of the what-if tool: FlowTracer's 16-node ECMP-vs-static comparison
(``flowtracer16`` the analysis, ``flowtracer16_page`` docs/reproduction.md), PRIME's packet-spraying scenarios on a
packet-level model (``spray_paths``, ``spray_sim``, ``spray_scenarios``, ``spray_report``), and what a slow node
group costs a synchronous job (``slow_group``)."""
