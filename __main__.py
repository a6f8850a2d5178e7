"""Pulumi entry point (`pulumi up --stack <name>`): the program lives in sglab/program.py."""

from sglab.program import run

run()
