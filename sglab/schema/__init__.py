"""The result document every later stage reads and writes: its models, records and the verdict's shape.

Apart from where results are stored (results/store.py) and how they travel from the cluster (results/sink.py).
"""
