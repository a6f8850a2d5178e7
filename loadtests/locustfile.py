"""sglab's locustfile: baseline and candidate arms side by side, measured token by token.

    locust -f loadtests/locustfile.py --baseline-url http://127.0.0.1:30000 --candidate-url http://127.0.0.1:30001

Every other entry point (`sglab bench`, `sglab ui`, the in-cluster Locust) runs these same users;
the code lives in sglab/load/. The web UI's A/B tab is a separate Locust plugin that `sglab ui` loads
beside this file (`-f loadtests/locustfile.py,sglab/ui/locust_plugin.py`); nothing here imports it.
"""

import os

from locust import events

from sglab.load import plugin
from sglab.load.users import BaselineUser, CandidateUser

plugin.install(events)

if os.environ.get(plugin.RUNNER_ENV):
    # distributed `sglab bench` workers: one user class follows the master's phase (arm, level, round)
    from sglab.load.users import ArmUser  # noqa: F401

__all__ = ["BaselineUser", "CandidateUser"]
