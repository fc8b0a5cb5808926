"""flowtracer: streaming telemetry of ECMP load balance on RoCEv2 leaf-spine fabrics.

This package (folder ``cli/``) is the command line that wires the stages together; the stages are
``flowtracer.collectors``, ``flowtracer.stream``, ``flowtracer.sim``, sharing only
``flowtracer.schemas``.
"""

__version__ = "0.1.0"
