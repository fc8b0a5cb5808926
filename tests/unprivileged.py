"""Running a command as user nobody from a root test (setpriv), and knowing when that cannot work here."""

from __future__ import annotations

import shutil
import subprocess
import sys

NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]


def as_nobody(cmd: list[str]) -> list[str] | str:
    """*cmd* prefixed to run as nobody, or the reason it cannot run so (no setpriv, or a checkout that nobody
    cannot read, such as a clone in a private 0700 folder)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return "setpriv (util-linux) is needed to run a command unprivileged as root"
    probe = subprocess.run([setpriv, *NOBODY, sys.executable, "-c", "import flowtracer.main"],
                           capture_output=True, text=True, timeout=60, check=False)
    if probe.returncode != 0:
        return f"user nobody cannot run this checkout ({probe.stderr.strip().splitlines()[-1][:200]})"
    return [setpriv, *NOBODY, *cmd]
