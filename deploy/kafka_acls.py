#!/usr/bin/env python3
"""Print the ``kafka-acls.sh`` commands that give each flowtracer stage only the Kafka access it needs.

The plan is ``flowtracer.plumbing.kafka_acls`` (one copy, also what the test bed's SASL proxy enforces);
this is argument parsing and printing. Review the output, then run it where ``kafka-acls.sh`` and an
admin client configuration are (the admin password stays in that properties file, never on a command
line)::

    flowtracer-kafka-acls --bootstrap-server kafka:9093 --command-config /etc/kafka/admin.properties \\
        --app-id flowtracer-processor [--agent-hosts-from topology.yaml] > acls.sh && sh acls.sh

Agents share the user ``flowtracer-agent`` unless ``--agent-hosts-from`` names a topology: then one user
per host, ``flowtracer-agent-<host>`` (each node's Secret holds only its own password). Either way the
records' host identity is their signature (docs/operations.md, Security: "Record identity").

Exit codes: 0 printed; 2 bad arguments or an unreadable topology.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.plumbing.kafka_acls import (
    AGENT_USER,
    COLLECTOR_USER,
    DIAGNOSE_USER,
    PROCESSOR_USER,
    agent_users_per_host,
    kafka_acls_args,
    plan,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="flowtracer-kafka-acls", description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-server", required=True, help="Kafka bootstrap (the admin's listener)")
    p.add_argument("--command-config", required=True, help="admin client properties file (TLS/SASL of the admin)")
    p.add_argument("--kafka-acls", default="kafka-acls.sh", help="the kafka-acls command [%(default)s]")
    p.add_argument("--app-id", action="append", default=None, help="processor app id(s) [flowtracer-processor]")
    p.add_argument("--agent-user", default=AGENT_USER, help="agents' user, or the per-host users' prefix")
    p.add_argument("--agent-hosts-from", type=Path, default=None, help="topology file: one agent user per host")
    p.add_argument("--collector-user", default=COLLECTOR_USER)
    p.add_argument("--processor-user", default=PROCESSOR_USER)
    p.add_argument("--diagnose-user", default=DIAGNOSE_USER)
    a = p.parse_args(argv)
    agents = [a.agent_user]
    if a.agent_hosts_from is not None:
        try:
            hosts = [h.name for h in load_topology(a.agent_hosts_from).hosts]
        except (OSError, TopologyError) as e:
            print(f"flowtracer-kafka-acls: {a.agent_hosts_from}: {e}", file=sys.stderr)
            return 2
        agents = agent_users_per_host(hosts, a.agent_user)
    head = [a.kafka_acls, "--bootstrap-server", a.bootstrap_server, "--command-config", a.command_config]
    for acl in plan(a.app_id or ["flowtracer-processor"], agents, a.collector_user, a.processor_user,
                    a.diagnose_user):
        print(shlex.join([*head, *kafka_acls_args(acl)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
