"""Sweep throughput and the sweep machinery's per-run overhead (run on demand; CI runs only --smoke).

    python benchmarks/bench_sweep.py            # the default Figure-2 sweep, 1 and 2 workers
    python benchmarks/bench_sweep.py --quick    # the same grid with one repetition
    python benchmarks/bench_sweep.py --smoke    # a 12-run grid, 1 worker: checks the script runs

Measures
--------
* runs per second of the default sweep (``python -m echosim sweep``'s grid) with 1 and
  2 local workers, kernels compiled beforehand (compile time reported separately),
  each in a fresh output directory; target: >= 1.8x from 1 to 2 workers;
* the per-run overhead of the sweep machinery, outside the simulation itself:
  config validation and expansion (per run), seed derivation, writing the run to the store
  (Parquet, atomic rename), and the executor's round trip on trivial runs; target < 5 ms.

Prints a Markdown table (and with ``--json PATH`` writes the numbers).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


def _timeit(fn, repeat=5):
    """Median wall seconds of `repeat` calls."""
    return harness.median(harness.interleave({"fn": harness.clocked(fn)}, repeat)["fn"])


SMOKE_GRID = ["optimizer.echo=[1, 2]", "optimizer.lr=[4.0, 8.0, 16.0]", "sweep.repetitions=1"]
"""--smoke's overrides of the default sweep: 2 K x 3 lrs per batch size, one repetition."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one repetition instead of the default three")
    harness.add_options(ap, smoke="a 12-run grid on 1 worker, 10 store writes, 10 trivial runs")
    args = ap.parse_args(argv)

    from importlib import resources

    from echosim.experiments import assemble, config, executors, specs, store, sweep

    overrides = ["sweep.lr_extend=0"] + (["sweep.repetitions=1"] if args.quick else [])  # a fixed set of runs
    if args.smoke:
        overrides += SMOKE_GRID
    n_writes, n_trivial = (10, 10) if args.smoke else (200, 100)
    worker_counts = (1,) if args.smoke else (1, 2)
    conf = config.default_config(overrides)
    n = len(conf.runs)
    rows = []
    with harness.Session("bench_sweep", args, argv) as session:
        compile_s = executors.warm_up(conf)
        rows.append(("kernel compile / cache load (parent)", f"{compile_s:.2f} s", ""))

        rate = {}
        for workers in worker_counts:
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                rep = sweep.run_sweep(conf, out=Path(d) / "out", workers=workers, progress=False,
                                      store_dir=Path(d) / "store")  # a fresh store: every run computed
                elapsed = time.perf_counter() - t
                assert rep.counts["ok"] + rep.counts["diverged"] == n, rep.counts
            rate[workers] = n / elapsed
            rows.append((f"default sweep, {workers} worker(s): {n} runs", f"{elapsed:.1f} s",
                         f"{rate[workers]:.1f} runs/s"))
        speedup = harness.ratio(rate.get(2), rate.get(1))
        if speedup is not None:
            rows.append(("speedup 1 → 2 workers (target >= 1.8x)", f"{speedup:.2f}x",
                         "met" if speedup >= 1.8 else "not met"))

        # ---- per-run overhead of the machinery
        text = resources.files("echosim").joinpath("default_sweep.toml").read_text(encoding="utf-8")
        import tomllib

        data = tomllib.loads(text)
        parse_s = _timeit(lambda: config.parse_config(data, overrides=overrides), repeat=3) / n
        spec = conf.runs[0]
        seed_s = _timeit(lambda: [specs.make_spec({"problem": spec.problem, "optimizer": spec.optimizer,
                                                   "echo": spec.echo, "pipeline": spec.pipeline, "run": spec.run,
                                                   "labels": {}}, rep, 0) for rep in range(1000)], repeat=3) / 1000
        payload = assemble.execute_run(spec)
        with tempfile.TemporaryDirectory() as d:
            k = [0]

            results = store.Store(d)

            def write():
                s = dict(payload["summary"], run_id=f"bench{k[0]:06d}")
                k[0] += 1
                results.add({"summary": s, "curves": payload["curves"]})
                results.flush()

            write_s = _timeit(lambda: [write() for _ in range(n_writes)], repeat=3) / n_writes
        points = len(payload["curves"]["batches"])

        trivial = config.parse_config({"problem": {"kind": "least_squares", "dim": 1},
                                       "optimizer": {"lr": [0.1 * i for i in range(1, n_trivial + 1)],
                                                     "batch_size": 1},
                                       "sweep": {"n_batches": 1, "repetitions": 2}})
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            sweep.run_sweep(trivial, out=Path(d) / "a", workers=worker_counts[-1], progress=False,
                            store_dir=Path(d) / "s")
            trivial_s = (time.perf_counter() - t) / len(trivial.runs)
        one = trivial.runs[0]
        run_only = _timeit(lambda: assemble.execute_run(one), repeat=20)
        machinery = parse_s + seed_s + write_s
        rows.append(("config validation + expansion, per run", f"{parse_s * 1e3:.3f} ms", ""))
        rows.append(("seed derivation + run id, per run", f"{seed_s * 1e3:.3f} ms", ""))
        rows.append((f"store write of one run (a Parquet pack, {points} logged points, atomic rename)",
                     f"{write_s * 1e3:.3f} ms", ""))
        rows.append(("machinery per run: config + seed + write (target < 5 ms)", f"{machinery * 1e3:.2f} ms",
                     "met" if machinery < 5e-3 else "not met"))
        rows.append((f"whole sweep of trivial runs (T = 1), per run, {worker_counts[-1]} worker(s), incl. merge",
                     f"{trivial_s * 1e3:.2f} ms", f"simulation alone {run_only * 1e3:.2f} ms"))

        print("| measurement | value | note |")
        print("|---|---|---|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
        session.results = {"runs": n, "overrides": overrides, "runs_per_s": rate, "speedup_1_to_2": speedup,
                           "compile_s": compile_s, "parse_s_per_run": parse_s, "seed_s_per_run": seed_s,
                           "write_s_per_run": write_s, "machinery_s_per_run": machinery,
                           "trivial_s_per_run": trivial_s, "run_only_s": run_only,
                           "rows": [dict(zip(("measurement", "value", "note"), r)) for r in rows]}
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
