"""Pulumi entry point (`pulumi up --stack <name>`): the program lives in sglab/deploy/program.py."""

from sglab.deploy.program import run

run()
