#!/usr/bin/env python3
"""M/M/1 queue in SimPy, written the idiomatic way, for the atmlab side-by-side.

A source process creates one process per customer; each customer requests a
``simpy.Resource(capacity=1)``, waits for it, holds it for an exponential
service time and releases it. The run stops when exactly ``--customers``
customers have been served (the source keeps generating arrivals until then,
as atmlab's queue model does).

Only ``env.run()`` is timed. Events are counted as 2 per served customer
(arrival + departure), the definition atmlab uses, so events/s compare
like for like. SimPy's own event count (timeouts, resource requests and
releases, process initialisations, ...) is reported as
``simpy_internal_events``: the events that ``env.step()`` processed.

Prints one JSON line, e.g.::

    {"engine": "simpy", "customers": 1000000, "events": 2000000, ...}

Usage: ``python mm1_simpy.py --seed 1 [--customers 1000000]``
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time

import simpy


class StepCountingEnvironment(simpy.Environment):
    """An Environment that counts ``step()`` calls (slower: for cross-checks)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        super().step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True, help="RNG seed")
    ap.add_argument("--customers", type=int, default=1_000_000,
                    help="customers served before the run stops (default 1e6)")
    ap.add_argument("--arrival-rate", type=float, default=0.9,
                    help="lambda, customers per second (default 0.9)")
    ap.add_argument("--service-rate", type=float, default=1.0,
                    help="mu, customers per second (default 1.0)")
    ap.add_argument("--count-steps", action="store_true",
                    help="also count env.step() calls through a subclass "
                         "(adds overhead to the timed run; for checking "
                         "simpy_internal_events only)")
    args = ap.parse_args()

    n = args.customers
    lam = args.arrival_rate
    mu = args.service_rate
    # Separate streams for arrivals and services (common random numbers style).
    arrival_rng = random.Random(f"{args.seed}/arrival")
    service_rng = random.Random(f"{args.seed}/service")

    env = StepCountingEnvironment() if args.count_steps else simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    all_served = env.event()
    served = 0
    wait_sum = 0.0
    sojourn_sum = 0.0

    def customer(env: simpy.Environment):
        nonlocal served, wait_sum, sojourn_sum
        arrived = env.now
        with server.request() as req:
            yield req
            wait_sum += env.now - arrived
            yield env.timeout(service_rng.expovariate(mu))
        served += 1
        sojourn_sum += env.now - arrived
        if served == n:
            all_served.succeed()

    def source(env: simpy.Environment):
        while True:
            yield env.timeout(arrival_rng.expovariate(lam))
            env.process(customer(env))

    env.process(source(env))

    t0 = time.perf_counter()
    env.run(until=all_served)
    wall = time.perf_counter() - t0

    # Every scheduled SimPy event took one value of env._eid; those still queued
    # were never processed. This costs nothing during the run.
    scheduled = next(env._eid)
    internal = scheduled - len(env._queue)

    events = 2 * served
    out = {
        "engine": "simpy",
        "customers": served,
        "events": events,
        "wall_seconds": wall,
        "events_per_second": events / wall,
        "mean_wait": wait_sum / served,
        "mean_sojourn": sojourn_sum / served,
        "simulated_seconds": env.now,
        "simpy_internal_events": internal,
        "simpy_internal_events_per_second": internal / wall,
        "simpy_version": simpy.__version__,
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "seed": args.seed,
    }
    if args.count_steps:
        out["simpy_step_calls"] = env.steps
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
