"""Distributed runs keep the answers: a worker forwards each request sample with its answer's text (output parity,
sglab/analysis/provenance.py), and the master's collector keeps both. In a subprocess: the collector imports Locust,
whose gevent patching stays out of the pytest process."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
from sglab.load.collector import SampleCollector, text_sha256
from sglab.schema.result import RequestSample

worker, master = SampleCollector(), SampleCollector()
sample = RequestSample(arm="candidate", level=1, round_index=0, start_s=0.0, prompt_index=3, temperature=0.0,
                       output_sha256=text_sha256(" the model"))
worker.record(sample, forward=True, text=" the model")
for raw in worker.take_outbox():
    master.record_forwarded(raw)
(got,) = master.samples()
assert got == sample, got
assert master.texts([got]) == {sample.output_sha256: " the model"}, master.texts([got])
print("ok")
"""


def test_a_workers_answers_reach_the_master() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
