"""The kernel-profile cache (DESIGN.md §13): measured GPU kernel rows keyed by table, backend, exact
arguments and GPU, filled just in time on idle GPUs. `pw kernel-profile` is its command line."""
