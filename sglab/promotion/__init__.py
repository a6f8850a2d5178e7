"""Promotion and rollback: evidence recomputed from sealed results, written into the target stack, logged."""
