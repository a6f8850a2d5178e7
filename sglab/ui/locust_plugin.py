"""sglab's A/B tab as a Locust plugin, loaded beside the locustfile:

    locust -f loadtests/locustfile.py,sglab/ui/locust_plugin.py --baseline-url U --candidate-url U --stack S

The locustfile knows nothing of the UI; `sglab ui` (and the cluster's Locust master) pass this file too,
and it plugs the tab into Locust's events. It defines no users.
"""

from locust import events

from sglab.ui import web_tab

web_tab.install(events)
