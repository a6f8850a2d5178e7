"""Which process is writing a run, so a run left `running` by a dead process can be told apart.

The bench records `{pid, host, process_started}` (in the result's `loadgen`) when the run starts.
`owner_alive` answers later: True (that process is still running here), False (it is gone, or the
pid now belongs to a process started at another time), None (another host: cannot tell).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from sglab.schema.result import LoadGen

PID_MAX = 4_194_304  # Linux's largest pid_max


def process_started(pid: int) -> str | None:
    """An id of the process's start (Linux: start time in clock ticks since boot), to tell a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of proc(5); fields[0] is field 3


def this_process() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_started": process_started(pid)}


def owner_alive(owner: LoadGen) -> bool | None:
    pid, host = owner.pid, owner.host
    if pid is None or pid > PID_MAX or not host:  # a result's record (its type checked when it was read)
        return None
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    recorded, now = owner.process_started, process_started(pid)
    if recorded is not None and now is not None and recorded != now:
        return False
    try:
        if now is not None and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except OSError:  # it ended just now
        return False
    return True
