"""`sglab bench` as a feature: the sequential stop over the round engine, and the judged console report."""
