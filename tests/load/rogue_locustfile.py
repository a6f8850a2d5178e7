"""A Locust worker that is not one of the run's: wrong token, fake samples in stats and idle reports."""

from locust import User, events, task

FAKE = {"arm": "rogue", "level": 1, "round_index": 0, "warmup": False, "start_s": 0.0, "prompt_index": 0,
        "prompt_tokens": 1, "output_tokens": 1, "expected_output_tokens": 1}


class Idle(User):
    @task
    def nothing(self):
        pass


@events.report_to_master.add_listener
def _fake_samples(client_id, data, **_kw):
    data["sglab_samples"] = [FAKE]


@events.init.add_listener
def _pose_as_a_worker(environment, **_kw):
    runner = environment.runner
    if runner is not None and type(runner).__name__ == "WorkerRunner":
        runner.send_message("sglab_hello", {"token": "guessed"})
        for serial in range(1, 4):
            runner.send_message("sglab_idle", {"serial": serial, "samples": [FAKE]})
