"""The SGLang server contract: flags, SGLang's rules, NCCL variables, simulator knobs, server env, HTTP client.

This package imports nothing else from sglab (tests/test_architecture.py checks it): config, the arms,
the simulator and the live check all read it, so one SGLang or NCCL fact lives in one place.
"""
