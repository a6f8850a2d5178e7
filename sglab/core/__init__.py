"""The ground floor: errors, paths, untrusted input and its bounded reader, child processes. Imports nothing of
sglab."""
