"""`sglab sweep`: a grid of candidates against one baseline, successive elimination, a confirmation A/B.

grid.py (the grid with SGLang's rules), run.py (the interleaved rounds and the elimination), state.py
(sweep.json, saved every round), confirm.py (the winner's A/B), evidence.py (what promote reads),
outputs.py (ranking, heatmap, Pareto, cost). docs/sweep.md.
"""
