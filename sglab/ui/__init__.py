"""The interactive face of sglab: Locust's own web UI with an "A/B" tab (`sglab ui`).

`web_tab` plugs into Locust's extension points (imported by loadtests/locustfile.py), `auth` wires
`--web-login`, `live` turns samples into a result document and `views` into the tab's tables and plot, and
`launcher` starts Locust (and, with `--target sim`, the two simulators).
"""
