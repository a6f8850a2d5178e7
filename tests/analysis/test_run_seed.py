"""Each run draws its own load seed unless one is given, and the simulators' acceptance draws follow it."""

from __future__ import annotations

from sglab.config.loadplan import LoadPlan
from sglab.sglang.sim_knobs import knob
from sglab.sim.acceptance import AcceptanceModel, acceptance_rng


def test_an_unset_seed_is_drawn_per_run_never_when_the_config_is_read_and_a_given_one_is_kept() -> None:
    assert LoadPlan().seed is None  # reading a stack draws nothing: its hashes and renders stay the same
    seeds = {LoadPlan().for_run().seed for _ in range(8)}
    assert None not in seeds and len(seeds) > 1
    assert LoadPlan(seed=7).for_run().seed == 7
    plan = LoadPlan().for_run()
    assert plan.for_run() is plan  # drawn once per run
    assert LoadPlan.model_validate(plan.model_dump()).seed == plan.seed  # recorded: a result reads back its own


def test_the_acceptance_draws_follow_the_run_seed() -> None:
    model = AcceptanceModel.build((0.6, 0.6, 0.6), 0.6, depth=3)

    def draws(run_seed: int) -> list[int]:
        return [model.sample_accepted_drafts(acceptance_rng(0, run_seed, seq)) for seq in range(200)]

    assert draws(11) == draws(11)
    assert draws(11) != draws(12)
    assert acceptance_rng(0, 0, 5).random() == __import__("random").Random("accept:0:5").random()


def test_the_run_seed_is_a_simulator_knob_outside_the_stacks_sim_section() -> None:
    assert knob("run_seed").env == "SGLAB_SIM_RUN_SEED" and knob("run_seed").group == "cli"


def test_the_simulator_reads_the_run_seed_from_its_env() -> None:
    from sglab.sim.cli_args import parse_sim_args

    assert parse_sim_args(["--model-path", "m"], {"SGLAB_SIM_RUN_SEED": "9"}).run_seed == 9
    assert parse_sim_args(["--model-path", "m"], {}).run_seed == 0
