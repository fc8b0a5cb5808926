"""Which Kafka principal may do what: the per-stage ACL plan that deploy/kafka_acls.py turns into ``kafka-acls``.

One SASL user per stage, so a host agent's credentials (on every GPU node) cannot write a switch's counters or
the processor's outputs, and a collector's cannot write flows:

* collector: write counters and switch congestion;
* agent (one shared user, or one per host ``<agent>-<host>``): write flows, path traces and QP ends, read QP
  ends, the processor's ECMP groups and trace requests (each read with no consumer group);
* processor: read its inputs (and the incidents, for its dashboard), write its outputs (dead letters included),
  and everything on the topics and
  the consumer group named by its app id (internal topics ``<app-id>.…``, changelogs ``<app-id>-…``, Faust's
  ``<app-id>-__assignor-__leader``): one PREFIXED ACL each, so a second deployment (another app id) gets
  its own;
* diagnose: read the processor's outputs, write and read incidents.

Every stage may also describe every ``flowtracer.`` topic and those of each app id (metadata only: names and
partitions, no data): the stages' start-up checks that the topics exist (``topic_admin.ensure_topics``, the
init containers' ``flowtracer-create-topics --app-id``). Topics are created with
an admin principal (``flowtracer-create-topics``), never by a stage. ACLs authorize topics, not records:
which host a FlowBatch speaks for is checked by its signature (``record_identity``).

Pure: the plan is data; ``may`` answers one question against it (the test bed's proxy asks it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flowtracer.schemas import topics

LITERAL, PREFIXED = "LITERAL", "PREFIXED"
TOPIC, GROUP = "Topic", "Group"
READ, WRITE, DESCRIBE, ALL = "Read", "Write", "Describe", "All"

#: Default SASL user names of the stages (docs/operations.md, Security).
COLLECTOR_USER, AGENT_USER, PROCESSOR_USER, DIAGNOSE_USER = (
    "flowtracer-collector", "flowtracer-agent", "flowtracer-processor", "flowtracer-diagnose")

AGENT_WRITES = (topics.FLOWS, topics.PATH_TRACES, topics.QP_ENDS)
"""What a host agent writes; nothing else."""
AGENT_READS = (topics.QP_ENDS, topics.ECMP_GROUPS, topics.TRACE_REQUESTS)
"""What a host agent reads: the peer exchange, and the processor's word on when to re-trace (docs/tracing.md)."""
COLLECTOR_WRITES = (topics.COUNTERS, topics.SWITCH_CONGESTION)
"""What a gNMI collector writes; nothing else."""
PROCESSOR_WRITES = tuple(t for t in topics.OUTPUT_TOPICS if t is not topics.INCIDENTS)
"""What the processor writes besides its own prefixed topics (the diagnosis writes the incidents)."""


@dataclass(frozen=True)
class Acl:
    """One ALLOW entry: ``User:<user>`` may ``operation`` on ``resource`` ``name`` (``pattern``)."""

    user: str
    operation: str
    resource: str
    name: str
    pattern: str = LITERAL

    def matches(self, resource: str, name: str) -> bool:
        """Whether this entry's resource pattern covers ``resource`` ``name``."""
        if resource != self.resource:
            return False
        return name.startswith(self.name) if self.pattern == PREFIXED else name == self.name


def _topic_acls(user: str, operation: str, ts: Iterable[topics.Topic]) -> list[Acl]:
    return [Acl(user, operation, TOPIC, t.name) for t in ts]


def plan(app_ids: Sequence[str] = ("flowtracer-processor",), agent_users: Sequence[str] = (AGENT_USER,),
         collector_user: str = COLLECTOR_USER, processor_user: str = PROCESSOR_USER,
         diagnose_user: str = DIAGNOSE_USER) -> list[Acl]:
    """Every ALLOW ACL of a deployment: processors ``app_ids`` (one user for all), agents ``agent_users``
    (one shared user, or one per host: ``agent_users_per_host``)."""
    prefix = "flowtracer."
    users = [collector_user, *agent_users, processor_user, diagnose_user]
    out = [Acl(u, DESCRIBE, TOPIC, p, PREFIXED) for u in users for p in (prefix, *app_ids)]
    out += _topic_acls(collector_user, WRITE, COLLECTOR_WRITES)
    for agent in agent_users:
        out += _topic_acls(agent, WRITE, AGENT_WRITES)
        out += _topic_acls(agent, READ, AGENT_READS)
    out += _topic_acls(processor_user, READ, topics.INPUT_TOPICS)
    out += _topic_acls(processor_user, WRITE, PROCESSOR_WRITES)
    out += _topic_acls(processor_user, READ, (topics.INCIDENTS,))  # its dashboard's incident list
    for app in app_ids:
        out += [Acl(processor_user, ALL, TOPIC, app, PREFIXED), Acl(processor_user, READ, GROUP, app, PREFIXED)]
    out += _topic_acls(diagnose_user, READ, (*PROCESSOR_WRITES, topics.INCIDENTS))
    out += _topic_acls(diagnose_user, WRITE, (topics.INCIDENTS,))
    return out


def agent_users_per_host(hosts: Iterable[str], base: str = AGENT_USER) -> list[str]:
    """One agent user per host, ``<base>-<host>``: a host's Kafka access can be revoked alone and the
    broker's logs name the host (the records' own identity is still their signature)."""
    return [f"{base}-{h}" for h in sorted(set(hosts))]


def may(acls: Iterable[Acl], user: str, operation: str, resource: str, name: str) -> bool:
    """Whether ``user`` may ``operation`` on ``resource`` ``name`` under ``acls`` (ALLOW entries only, as
    Kafka's authorizer with no DENY: ``All`` covers every operation; ``Read`` and ``Write`` imply ``Describe``)."""
    implied = {operation, ALL} | ({READ, WRITE} if operation == DESCRIBE else set())
    return any(a.user == user and a.operation in implied and a.matches(resource, name) for a in acls)


def kafka_acls_args(acl: Acl) -> list[str]:
    """The ``kafka-acls.sh`` arguments that add ``acl`` (without ``--bootstrap-server`` and
    ``--command-config``)."""
    kind = {TOPIC: "--topic", GROUP: "--group"}[acl.resource]
    return ["--add", "--allow-principal", f"User:{acl.user}", "--operation", acl.operation, kind, acl.name,
            "--resource-pattern-type", acl.pattern.lower()]
