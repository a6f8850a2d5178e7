"""`sglab sim`: an SGLang-compatible CPU-only server with an EAGLE-3 + NCCL timing model.

cli_args (flags/env) -> profile (constants) -> timing + acceptance (pure model) -> engine (scheduler
loop) -> state + generate_api/openai_api/server (HTTP). `testing.running_sim` starts one for tests.
"""
