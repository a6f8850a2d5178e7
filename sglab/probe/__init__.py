"""The NCCL probe: all-reduce latency at the stack's decode message sizes, per NCCL variant, with no model.

Modules that run inside the server image (the cluster Job mounts them there) import only the standard
library, torch and pydantic: spec, worker, result, nccl. The ones that read a
stack (plan) or talk to results/ and the cluster (store) import the rest of sglab and run only where sglab
is installed.
"""
