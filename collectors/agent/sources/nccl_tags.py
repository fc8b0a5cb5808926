"""What the NCCL log says a QP is for (``QpTag``, over ``CommInfo``), and the bounded store of those tags of a host.

A tag is held by (RDMA device, qpn), unique on a host at a time, and by (pid, qpn) for when the log did not name
the device. At most ``max_tags`` of each are held between two ``retain`` calls (the oldest goes first,
``forgotten_tags``); ``retain``, called with each window's QP listing, forgets the tags of QPs that are gone
(``forgotten_qps``), so a later QP that reuses the number is not given a stale tag. A tag learned since the
previous ``retain`` is kept one more call: its QP may have been created after the listing was taken. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_TAGS = 1 << 16
"""QP tags held per host between two ``retain`` calls (``QpTags.max_tags``); the oldest goes first."""


@dataclass(slots=True)
class CommInfo:
    """One communicator as seen by one GPU of one process. ``pointer`` is "" (and ``nranks`` 0) while only a
    Channel line has named it (a log that starts after its init)."""

    pointer: str
    rank: int
    nranks: int
    comm_id: str = ""  # commId hash from "Init START/COMPLETE"; "" until seen
    collective: str = ""  # last collective enqueued (AllReduce, ...), "" before the first
    op_count: int = 0
    gpu: int = -1  # the CUDA device of the process it runs on, -1 when no line said

    @property
    def id(self) -> str:
        """The id to report: NCCL's commId hash, or the comm pointer when NCCL did not log one."""
        return self.comm_id or self.pointer


@dataclass(frozen=True, slots=True)
class QpTag:
    """What the log says one QP is for. ``peer_rank`` / ``channel`` are -1 when unknown."""

    comm: CommInfo
    channel: int
    peer_rank: int


class QpTags:
    """The QP tags of one host, bounded (module docstring)."""

    def __init__(self, max_tags: int = MAX_TAGS) -> None:
        if max_tags < 1:
            raise ValueError(f"max_tags must be at least 1, not {max_tags}")
        self.max_tags = max_tags
        self.by_dev: dict[tuple[str, int], QpTag] = {}
        self.by_pid: dict[tuple[int, int], QpTag] = {}
        self._pid_qpns: dict[int, set[int]] = {}  # pid -> qpns in by_pid
        self._fresh_dev: set[tuple[str, int]] = set()  # learned since the last retain
        self._fresh_pid: set[tuple[int, int]] = set()
        #: Tags forgotten by ``retain`` because the QP was gone.
        self.forgotten_qps = 0
        #: Tags dropped because ``max_tags`` were held between two ``retain`` calls.
        self.forgotten_tags = 0

    def hold(self, device: str, pid: int, qpn: int, tag: QpTag) -> None:
        """Tag QP ``qpn`` of ``pid`` (on ``device``, "" when not known)."""
        if device:
            self._put(self.by_dev, self._fresh_dev, (device, qpn), tag)
        self._put(self.by_pid, self._fresh_pid, (pid, qpn), tag)
        self._pid_qpns.setdefault(pid, set()).add(qpn)

    def get(self, pid: int, device: str, qpn: int) -> QpTag | None:
        """The tag of a QP: by device first (NCCL in a container logs its own pid namespace's pid), then by pid."""
        return self.by_dev.get((device, qpn)) or self.by_pid.get((pid, qpn))

    def forget_pid(self, pid: int) -> None:
        """Drop the tags held by (pid, qpn) of a process forgotten."""
        for qpn in self._pid_qpns.pop(pid, ()):
            self.by_pid.pop((pid, qpn), None)
            self._fresh_pid.discard((pid, qpn))

    def retain(self, live_dev: set[tuple[str, int]], live_pid: set[tuple[int, int]]) -> None:
        """Forget the tags of QPs gone from the host's QP listing: ``live_dev`` holds its (device, qpn),
        ``live_pid`` its (pid, qpn). Tags learned since the previous call are kept once more."""
        for key in [k for k in self.by_dev if k not in live_dev and k not in self._fresh_dev]:
            del self.by_dev[key]
            self.forgotten_qps += 1
        for key in [k for k in self.by_pid if k not in live_pid and k not in self._fresh_pid]:
            del self.by_pid[key]
            self._unlist(key)
        self._fresh_dev.clear()
        self._fresh_pid.clear()

    def __bool__(self) -> bool:
        return bool(self.by_dev or self.by_pid)

    def _unlist(self, key: tuple[int, int]) -> None:
        qpns = self._pid_qpns.get(key[0])
        if qpns is not None:
            qpns.discard(key[1])
            if not qpns:
                del self._pid_qpns[key[0]]

    def _put(self, tags: dict, fresh: set, key: tuple, tag: QpTag) -> None:
        if len(tags) >= self.max_tags and key not in tags:
            old = next(iter(tags))
            del tags[old]
            fresh.discard(old)
            if tags is self.by_pid:
                self._unlist(old)
            self.forgotten_tags += 1
        tags[key] = tag
        fresh.add(key)
