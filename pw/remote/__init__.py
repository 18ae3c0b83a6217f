"""Work that runs somewhere else: the executor seam (`remote.yaml`, `--remote NAME`): `local` (this
machine's idle GPUs and campaign runner) or `slurm` (a job array for a kernel-profile fill, an
exclusive job for a campaign)."""
