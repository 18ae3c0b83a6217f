"""The kernel-profile cache (docs/kernel-profile.md): measured GPU kernel rows keyed by table, backend, exact
arguments and GPU, filled just in time on idle GPUs. `pw kernel-profile` is its command line."""
