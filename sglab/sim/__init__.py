"""`sglab sim`: an SGLang-compatible CPU-only server with an EAGLE-3 + NCCL timing model.

Data flows one way: cli_args (launch_server flags, --sim-*/SGLAB_SIM_*, NCCL_* env) -> profile (named
constants) -> timing + acceptance (the pure model, NGRAM's included) -> engine (the scheduler loop) -> state ->
HTTP routes (api, server; metrics, faults beside them). tokens is the stand-in tokenizer and the prompt's
category; testing.running_sim starts a real server for tests and load generators.
docs/simulator.md documents the model and its calibration.
"""
