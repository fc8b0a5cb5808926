"""The resolver registry: names come from the resolver classes themselves."""

from __future__ import annotations

from flowtracer.stream.resolvers.contract import Resolver
from flowtracer.stream.resolvers.hash import HashResolver
from flowtracer.stream.resolvers.infer.resolver import InferResolver
from flowtracer.stream.resolvers.trace import TraceResolver

RESOLVERS: dict[str, type[Resolver]] = {cls.name: cls for cls in (HashResolver, InferResolver, TraceResolver)}
