"""The resolver registry: names come from the resolver classes themselves."""

from __future__ import annotations

from .resolve import Resolver
from .resolve_hash import HashResolver
from .resolve_infer import InferResolver

RESOLVERS: dict[str, type[Resolver]] = {cls.name: cls for cls in (HashResolver, InferResolver)}
