"""Python code shared by both frontends: routing queries and settings, calibration, the benchmark
grid and its reports, and the command line.

This folder is shipped inside each package as a private subpackage (`metal_linalg._shared`,
`metal_linalg_torch._shared`). Nothing here imports a framework: each frontend hands in a small
adapter (its core calls, how to build inputs, run an op and wait for it, and its peers).
"""
