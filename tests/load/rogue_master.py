"""Run as a subprocess: a bench-style Locust master with one worker of ours and one rogue worker; prints JSON."""

import json
import subprocess
import sys
import time
from pathlib import Path

import gevent
import locust  # noqa: F401  (gevent monkey-patching first)
from locust.env import Environment
from locust.event import Events

from sglab.load.collector import Phase, get_collector
from sglab.load.distributed import MasterControl
from sglab.load.targets import free_port
from sglab.load.users import ArmUser
from sglab.load.distributed import LocalWorkers

env = Environment(user_classes=[ArmUser], events=Events())
env.create_master_runner("127.0.0.1", free_port())
collector = get_collector(env)
workers = LocalWorkers(1, env, "the-run-token")
master = MasterControl(env, "the-run-token")
workers.start()
ours = list(env.runner.clients.keys())
rogue = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(Path(__file__).with_name("rogue_locustfile.py")),
                          "--worker", "--master-host", "127.0.0.1", "--master-port", str(env.runner.master_bind_port),
                          "--loglevel", "WARNING"], stdin=subprocess.DEVNULL)
try:
    deadline = time.monotonic() + 30
    seen = set()
    while time.monotonic() < deadline and not (seen := set(env.runner.clients) - set(ours)):
        gevent.sleep(0.01)
    master.send_phase(Phase(serial=1, open=False))
    gevent.sleep(4.5)  # the rogue's first stats report, its hello and idle messages, our worker's idle
    seen_rogue = sorted(seen | set(master.expected.refused))
    rogue_exit = rogue.poll()
    print(json.dumps({"ours": ours, "rogue": seen_rogue, "workers": master.workers(),
                      "idle": sorted(master.idle.get(1, ())), "all_idle": master.all_idle(1),
                      "sample_arms": sorted({s.arm for s in collector.samples()}), "rogue_exit": rogue_exit}))
finally:
    workers.stop()
    if rogue.poll() is None:
        rogue.kill()
    rogue.wait()
