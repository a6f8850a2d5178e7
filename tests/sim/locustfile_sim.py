"""A minimal Locust user for the simulator test: streams /generate and checks the token count."""

import json

from locust import HttpUser, constant, task

MAX_NEW_TOKENS = 20


class GenerateUser(HttpUser):
    wait_time = constant(0)

    @task
    def generate(self) -> None:
        payload = {"text": "hello from locust", "stream": True,
                   "sampling_params": {"max_new_tokens": MAX_NEW_TOKENS, "ignore_eos": True}}
        with self.client.post("/generate", json=payload, stream=True, catch_response=True) as response:
            last, done = None, False
            for line in response.iter_lines():
                if line == b"data: [DONE]":
                    done = True
                elif line.startswith(b"data: "):
                    last = json.loads(line[6:])
            if not done or last is None or last["meta_info"]["completion_tokens"] != MAX_NEW_TOKENS:
                response.failure(f"bad stream: done={done} last={last and last['meta_info']}")
            else:
                response.success()
