"""Harness (NOT editable): python3 main.py STEPS SEED

Builds a 64x64 state and weight on the GPU from SEED, advances the state STEPS times through
ops.make_runner, and prints every element of the final state (%.8e, one row a line).
"""

import sys

import ops
import torch


def main() -> int:
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} STEPS SEED", file=sys.stderr)
        return 2
    steps, seed = int(sys.argv[1]), int(sys.argv[2])
    if not torch.cuda.is_available():
        print("torch-small-ops: no CUDA device", file=sys.stderr)
        return 2
    gen = torch.Generator(device="cpu").manual_seed(seed)
    state = (torch.rand(64, 64, generator=gen) - 0.5).cuda()
    w = (torch.rand(64, 64, generator=gen) - 0.5).cuda()
    run = ops.make_runner(state, w)
    for _ in range(steps):
        state = run(state)
    out = state.cpu()
    print(f"steps {steps} seed {seed}")
    for row in out.tolist():
        print(" ".join(f"{v:.8e}" for v in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
