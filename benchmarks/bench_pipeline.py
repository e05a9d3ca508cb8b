"""Speed of the pipeline simulator: the Numba event loop next to the SimPy model.

Run on demand (not a test)::

    python benchmarks/bench_pipeline.py [--quick] [--json PATH]
    python benchmarks/bench_pipeline.py --smoke     # tiny sizes, no cold compile: checks it runs

Prints a Markdown table:

1. events per second of the Numba loop (`simulate_with_times`) and of the naive
   SimPy model (`tests/reference/simpy_pipeline.py`) on the same config and the same
   pre-drawn times (median of repeats; the two results are checked to be equal);
2. `simulate` end to end (NumPy draws + event loop) for 10^6 fresh batches, 8
   workers, exponential loader, greedy policy;
3. the compile cost: a cold compile in a subprocess with an empty Numba cache, and
   the first call in this process (a compile or a cache load).

Targets: Numba >= 50x SimPy in events/s; 10^6 batches x 8 workers under 1 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

sys.path.insert(0, str(harness.ROOT))  # for tests.reference

from echosim.pipeline.model import Pipeline
from echosim.pipeline.schedule import simulate, simulate_with_times
from echosim.pipeline.service_times import Deterministic, Exponential


def _median_time(fn, repeats):
    """(summary of the wall seconds of `repeats` calls, the last call's result)."""
    out = []
    times = harness.interleave({"fn": harness.clocked(lambda: out.append(fn()))}, repeats)["fn"]
    return harness.summary(times), out[-1]


def _cold_compile_seconds() -> float:
    """First simulate() call in a fresh interpreter with an empty Numba cache."""
    code = (
        "import time\n"
        "from echosim.pipeline import Pipeline, simulate\n"
        "from echosim.pipeline.service_times import Exponential\n"
        "p = Pipeline(Exponential(4.0), workers=2, policy='example', echo=2)\n"
        "t0 = time.perf_counter(); simulate(p, 20, 0, batch_size=2); t1 = time.perf_counter()\n"
        "simulate(p, 20, 0, batch_size=2); t2 = time.perf_counter()\n"
        "print((t1 - t0) - (t2 - t1))\n"
    )
    with tempfile.TemporaryDirectory() as cache:
        o = harness.python(code, env=harness.env_for(harness.ROOT, numba_cache=cache, threads_one=False))
    return float(o.check("the cold compile").last_line())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    harness.add_options(ap, smoke="tiny sizes, 3 repeats, no cold compile")
    args = ap.parse_args(argv)

    from tests.reference.simpy_pipeline import simulate_simpy

    with harness.Session("bench_pipeline", args, argv) as session:
        rows = []
        # first call in this process: compile, or load Numba's on-disk cache
        t0 = time.perf_counter()
        simulate(Pipeline(Exponential(4.0), workers=2, policy="greedy"), 20, 0)
        simulate(Pipeline(Exponential(4.0), policy="example", echo=2), 20, 0, batch_size=2)
        first_call = time.perf_counter() - t0
        cold = None if args.smoke else _cold_compile_seconds()

        # 1. Numba loop vs SimPy on the same pre-drawn times
        T_cmp = 300 if args.smoke else 5_000 if args.quick else 50_000
        p = Pipeline(Deterministic(8.0), workers=8, prefetch=16, step_time=1.0, policy="greedy")
        rng = np.random.default_rng(0)
        load = rng.exponential(8.0, T_cmp)
        t_numba, a = _median_time(lambda: simulate_with_times(p, load, 1.0), 3 if args.smoke else 21)
        t_simpy, b = _median_time(lambda: simulate_simpy(p, load, 1.0), 1 if args.quick or args.smoke else 3)
        assert np.array_equal(a.step_end, b["step_end"]) and np.array_equal(a.ready_time, b["ready_time"])
        ev = a.n_events
        rows.append((f"Numba loop, greedy, W=8, C=16, T={T_cmp:,} (same times as SimPy)", ev, t_numba))
        rows.append(("SimPy model, same config and times", ev, t_simpy))
        speedup = harness.ratio(t_simpy, t_numba)

        # 2. simulate() end to end, 10^6 fresh batches, 8 workers, exponential loader, greedy
        T_big = 2_000 if args.smoke else 200_000 if args.quick else 1_000_000
        big = {
            "step 1.0 (constant)": Pipeline(Exponential(8.0), workers=8, prefetch=16, step_time=1.0,
                                            policy="greedy"),
            "step Exponential(1.0) (jitter, chunked draws)": Pipeline(
                Exponential(8.0), workers=8, prefetch=16, step_time=Exponential(1.0), policy="greedy"),
        }
        big_times = {}
        for label, pipe in big.items():
            t_big, sched = _median_time(lambda pipe=pipe: simulate(pipe, T_big, seed=1), 3)
            big_times[label] = t_big["median"]
            rows.append((f"simulate(), greedy, W=8, C=16, T={T_big:,}, {label}", sched.n_events, t_big))

        print("| run | events | seconds (median) | IQR | events/s |")
        print("|---|---:|---:|---:|---:|")
        for name, n_ev, sec in rows:
            print(f"| {name} | {n_ev:,} | {sec['median']:.4f} | {sec['iqr']:.4f} | {n_ev / sec['median']:,.0f} |")
        print()
        print(f"- Numba / SimPy speedup (events/s): **{speedup:.0f}x** (target >= 50x)")
        for label, t in big_times.items():
            print(f"- {T_big:,} batches x 8 workers, {label}: **{t:.3f} s** (target < 1 s for 10^6)")
        cold_text = "not measured (--smoke)" if cold is None else f"{cold:.2f} s"
        print(f"- compile, cold (empty cache, subprocess): {cold_text}; first call in this process "
              f"(compile or cache load): {first_call:.2f} s")
        session.results = {"rows": [{"run": name, "events": n_ev, "events_per_s": n_ev / sec["median"], **sec}
                                    for name, n_ev, sec in rows],
                           "numba_over_simpy": speedup, "cold_compile_s": cold, "first_call_s": first_call}


if __name__ == "__main__":
    main()
