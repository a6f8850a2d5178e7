"""`sglab sweep`: a grid of candidates against one baseline, a best-arm race, a confirmation A/B.

grid.py (the grid with SGLang's rules), run.py (the interleaved rounds of the race, whose rule is
sglab/sweep/race.py), state.py (sweep.json, saved every round), confirm.py (the pick's A/B),
evidence.py (what promote reads), outputs.py (ranking, heatmap, Pareto, cost, the verdict). docs/sweep.md.
"""
