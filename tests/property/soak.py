"""Long randomized soak of the engine (run by hand; pytest does not collect it).

    .venv/bin/python -m tests.property.soak --first 0 --last 500

Runs the same drivers as the property tests (fixed Lobsters-shaped catalog and random
schemas/plans), each seed with and without a tiny memory budget, 150-250 operations per run,
and stops at the first wrong answer, printing the seed to reproduce.
"""

from __future__ import annotations

import argparse
import random

from tests.property import test_engine_property, test_random_plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--last", type=int, default=200)
    args = parser.parse_args()
    checked = 0
    for seed in range(args.first, args.last):
        rng = random.Random(seed)
        ops = [(rng.randint(0, 9), rng.randint(0, 2**16)) for _ in range(200)]
        for budget in (None, 2500):
            try:
                checked += test_random_plans.drive(seed, ops[:150], budget).checked
                checked += test_engine_property.drive(seed, ops, budget, lag=True).checked
            except AssertionError:
                print(f"FAILED: seed {seed} budget {budget}")
                raise
    print(f"ok: {args.last - args.first} seeds, {checked} answers checked")


if __name__ == "__main__":
    main()
