"""sglab's open-loop schedule as a Locust plugin, loaded by `sglab ui --profile rate|trace` beside the A/B tab:

    locust -f loadtests/locustfile.py,sglab/ui/locust_plugin.py,sglab/ui/open_loop_plugin.py ... OpenLoopUser

It gives Locust a LoadTestShape (the form then has no users or spawn rate: the shape keeps the profile's
in-flight cap running until the schedule is done) and the one user class that follows the schedule.
"""

from sglab.ui.open_loop import OpenLoopShape, OpenLoopUser

__all__ = ["OpenLoopShape", "OpenLoopUser"]
