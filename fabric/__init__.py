"""The fabric model: the topology file and its generator and diff, routing over it (links, equal-cost paths, ECMP
groups), interface addressing, switch ECMP hash models, RoCEv2 source ports, vendor platform path profiles, link
speeds, host inventories and max-min fair sharing. Pure: no I/O but reading files."""
