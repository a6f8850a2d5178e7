"""sglab's locustfile: baseline and candidate arms side by side, measured token by token.

    locust -f loadtests/locustfile.py --baseline-url http://127.0.0.1:30000 --candidate-url http://127.0.0.1:30001

Every other entry point (`sglab bench`, `sglab ui`, the in-cluster Locust) runs these same users;
the code lives in sglab/load/. The web UI's A/B tab is a separate Locust plugin that `sglab ui` loads
beside this file (`-f loadtests/locustfile.py,sglab/ui/locust_plugin.py`); nothing here imports it.
"""

import os
import sys

from locust import events

from sglab.load import plugin
from sglab.load.settings import RUNNER_ENV
from sglab.load.users import BaselineUser, CandidateUser

plugin.install(events)

UI_PLUGIN_MODULE = "sglab.ui.web_tab"  # checked by name only: this file must not import the UI


@events.init.add_listener
def _login_needs_the_ui_plugin(environment, **_kwargs) -> None:
    """`--web-login` is implemented by the UI plugin; without it Locust's login would protect nothing."""
    web_ui = environment.web_ui
    if web_ui is not None and web_ui.web_login and UI_PLUGIN_MODULE not in sys.modules:
        sys.stderr.write("error: --web-login needs sglab's UI plugin, which provides the login; run "
                         "locust -f loadtests/locustfile.py,sglab/ui/locust_plugin.py ...\n")
        sys.exit(2)

if os.environ.get(RUNNER_ENV):
    # distributed `sglab bench` workers: one user class follows the master's phase (arm, level, round)
    from sglab.load.users import ArmUser  # noqa: F401

__all__ = ["BaselineUser", "CandidateUser"]
