#!/usr/bin/env python3
"""Write each host's record-signing key, derived from the master key, one file per host.

The processor holds the master key (``--host-key-master-file``, the Secret ``flowtracer-host-keys``);
each GPU node gets only its own key, at the path its agent reads (``--host-key-file``; the shipped
DaemonSet: ``/etc/flowtracer/host-key/key`` on the node, placed by your node provisioning, mode 0400).
A host's key reveals neither the master nor another host's key (``flowtracer.schemas.record_identity``)::

    head -c 32 /dev/urandom | xxd -p -c 64 > master.key          # once; keep it like a CA key
    flowtracer-host-keys --master-file master.key --topology topology.yaml --out-dir keys/
    # -> keys/<host>.key, copy each to its node as /etc/flowtracer/host-key/key

Keys are written 0400 and never printed. Exit codes: 0 written; 2 bad arguments, an unreadable master key
or topology, or an output file that exists (use --force to replace).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.schemas.record_identity import IdentityError, host_key, load_key


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="flowtracer-host-keys", description=__doc__.split("\n\n")[0])
    p.add_argument("--master-file", type=Path, required=True, help="the master key (hex, >= 32 bytes)")
    p.add_argument("--topology", type=Path, default=None, help="write a key for every host of this topology")
    p.add_argument("--host", action="append", default=[], help="write a key for this host (repeatable)")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--force", action="store_true", help="replace existing key files")
    a = p.parse_args(argv)
    try:
        master = load_key(a.master_file, "--master-file")
        hosts = set(a.host) | ({h.name for h in load_topology(a.topology).hosts} if a.topology else set())
    except (IdentityError, OSError, TopologyError) as e:
        print(f"flowtracer-host-keys: {e}", file=sys.stderr)
        return 2
    if not hosts:
        print("flowtracer-host-keys: no hosts: give --topology or --host", file=sys.stderr)
        return 2
    a.out_dir.mkdir(parents=True, exist_ok=True)
    for host in sorted(hosts):
        path = a.out_dir / f"{host}.key"
        if path.exists() and not a.force:
            print(f"flowtracer-host-keys: {path} exists (--force replaces it)", file=sys.stderr)
            return 2
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "w") as f:
            f.write(host_key(master, host).hex() + "\n")
    print(f"wrote {len(hosts)} host key(s) to {a.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
