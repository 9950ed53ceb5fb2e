"""A CPU-only loop of steps, each marked with launchprof.step() (NVTX range ``step`` in
domain ``launchprof``). Used by the end-to-end tests of ``launchprof profile``.

    launchprof profile examples/cpu/steps_loop.py --steps 20 --work 20000

``--forever`` loops until interrupted (Ctrl-C test). Prints ``started`` once the first
step is done, and the number of steps at the end.
"""

import argparse

import launchprof


def busy(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--work", type=int, default=20_000, help="loop iterations per step")
    parser.add_argument("--forever", action="store_true")
    args = parser.parse_args()
    done = 0
    while args.forever or done < args.steps:
        with launchprof.step():
            busy(args.work)
        done += 1
        if done == 1:
            print("started", flush=True)
    print(f"steps: {done}", flush=True)


if __name__ == "__main__":
    main()
