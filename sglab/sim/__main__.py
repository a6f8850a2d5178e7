"""`python -m sglab.sim [flags]`: the simulator without loading the rest of the CLI (fast start)."""

import sys

from sglab.sim.cli_args import parse_or_exit
from sglab.sim.server import serve

sys.exit(serve(parse_or_exit(sys.argv[1:])))
