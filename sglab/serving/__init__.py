"""The live judge of a production rollout (docs/production.md).

spec.py       what the judge needs, derived from a stack's `sglab:serving` (also carried into the cluster as JSON)
prometheus.py Prometheus's HTTP API (/api/v1/query, /api/v1/query_range), and a real local one for the rehearsal
windows.py    one paired observation per window: per-arm SGLang metrics over the same wall-clock window
judge.py      the decision (promote / abort / continue): the bench's confidence sequence plus guards, and its loop
watch.py      the standing control: the live gain after the rollout, and when it dropped below zero
objects.py    the `serving` chart values: the Rollout, its AnalysisTemplate (the judge's Job), the watch CronJob
rehearsal.py  `--target sim`: simulators, a real Prometheus, Locust traffic split by the canary weight
"""
