"""Names the launcher passes to Locust for an open-loop run (importable without Locust)."""

USER_CLASS = "OpenLoopUser"  # sglab.ui.open_loop.OpenLoopUser: the only user class an open-loop run spawns
