"""Records.save under kill -9 and a full disk: is a records file ever lost or left damaged?

    PYTHONPATH=. python benchmarks/trial_records_atomic.py                  # 20 + 20 trials, about 30 s
    PYTHONPATH=. python benchmarks/trial_records_atomic.py --trials 50
    PYTHONPATH=. python benchmarks/trial_records_atomic.py --smoke     # 2 kill trials, no mount

Not a timing. `Records.save` writes a temp file beside the target and renames it over the
target, so the file at the target is always a whole records file: the old one or the new.

* kill -9: a child process saves records of several sizes over one path in a loop; it is
  killed with SIGKILL at a random moment (0 to 400 ms after it said it started); then the
  file at the path must load (`load_records`) and be one of the versions saved. Temp files
  left beside it by the killed writer are counted (they are never read as records).
* full disk: a small tmpfs is mounted (root only: ``mount -t tmpfs -o size=...``), a
  records file saved on it, the rest of the space filled, then a little freed (0 to
  64 kB, drawn per trial), and a larger records file saved over the first: `save` must
  raise one ValueError saying it could not write and that the previous file is
  unchanged, the previous file must load with its content, and no temp file may remain.
  Without root (or where mounting is refused) this part says so and is skipped.

Prints the counts: trials, records lost (a file that does not load or is not a version
saved), temp files left, and for the full disk the errors raised.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from echosim.loop import Records, load_records

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


def make(n_steps: int, seed: int) -> Records:
    """Synthetic records of a sync run of `n_steps` fresh batches (no loop needed)."""
    rng = np.random.default_rng(seed)
    return Records(policy="sync", echo=1, batch_size=32, load_time=rng.random(n_steps),
                   load_censored=np.zeros(n_steps, bool), wait_time=rng.random(n_steps),
                   steps_per_batch=np.ones(n_steps, np.int64), cap=np.ones(n_steps, np.int64),
                   epoch=np.zeros(n_steps, np.int64), step_batch=np.arange(n_steps),
                   step_start=np.cumsum(rng.random(n_steps)), step_time=rng.random(n_steps),
                   loss=rng.random(n_steps))


SIZES = (1_000, 50_000, 200_000)

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {bench!r})
    from trial_records_atomic import make, SIZES
    recs = [make(n, n) for n in SIZES]
    print("ready", flush=True)
    i = 0
    while True:
        recs[i % len(recs)].save({path!r})
        i += 1
""")


def kill_trials(n: int, rng: random.Random) -> dict:
    out = {"trials": 0, "lost": 0, "temp_left": 0, "versions": {}}
    with tempfile.TemporaryDirectory(prefix="echosim-kill-") as d:
        path = Path(d) / "run.npz"
        make(SIZES[0], SIZES[0]).save(path)
        code = CHILD.format(bench=str(Path(__file__).parent), path=str(path))
        for _ in range(n):
            proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                    env=dict(os.environ))
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0, 0.4))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            out["trials"] += 1
            try:
                r = load_records(path)
                ok = r.n_steps in SIZES and np.array_equal(r.loss, make(r.n_steps, r.n_steps).loss)
            except ValueError:
                ok = False
            if ok:
                out["versions"][r.n_steps] = out["versions"].get(r.n_steps, 0) + 1
            else:
                out["lost"] += 1
        out["temp_left"] = sum(1 for p in Path(d).iterdir() if p.name != "run.npz")
        out["temp_names"] = sorted(p.name for p in Path(d).iterdir() if p.name != "run.npz")[:2]
    return out


def full_disk_trials(n: int, rng: random.Random) -> dict | str:
    if os.geteuid() != 0:
        return "skipped: mounting a small tmpfs needs root"
    out = {"trials": 0, "lost": 0, "temp_left": 0, "refused": 0, "saved": 0, "messages": set()}
    mnt = Path(tempfile.mkdtemp(prefix="echosim-full-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        mnt.rmdir()
        return f"skipped: mount refused ({done.stderr.strip()})"
    try:
        small, big = make(SIZES[0], SIZES[0]), make(SIZES[1], SIZES[1])
        for _ in range(n):
            path = mnt / "run.npz"
            small.save(path)
            filler = mnt / "filler"
            with open(filler, "wb") as f:  # fill the disk
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
            try:  # the last partial write may have left bytes unwritten: fill them too
                with open(filler, "ab") as f:
                    while True:
                        f.write(b"\0" * 512)
                        f.flush()
            except OSError:
                pass
            size = filler.stat().st_size
            os.truncate(filler, max(0, size - rng.randrange(0, 65536)))  # free 0 to 64 kB
            out["trials"] += 1
            try:
                big.save(path)
                out["saved"] += 1
                expect = big
            except ValueError as exc:
                out["refused"] += 1
                out["messages"].add(str(exc).replace(str(path), "PATH"))
                expect = small
            try:
                r = load_records(path)
                ok = r.n_steps == expect.n_steps and np.array_equal(r.loss, expect.loss)
            except ValueError:
                ok = False
            out["lost"] += not ok
            out["temp_left"] += sum(1 for p in mnt.iterdir() if p.name not in ("run.npz", "filler"))
            filler.unlink()
            path.unlink()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    harness.add_options(ap, smoke="2 kill trials; the full-disk part (a tmpfs mount) skipped")
    args = ap.parse_args(argv)
    if args.smoke:
        args.trials = 2
    rng = random.Random(args.seed)
    with harness.Session("trial_records_atomic", args, argv) as session:
        k = kill_trials(args.trials, rng)
        print(f"seed {args.seed}\n")
        print(f"kill -9 during Records.save: {k['trials']} trials, {k['lost']} records lost, "
              f"{k['temp_left']} temp files left by the killed writers (e.g. {', '.join(k['temp_names'])}); "
              f"versions found after the kill: "
              f"{dict(sorted(k['versions'].items()))}")
        f = "skipped: --smoke" if args.smoke else full_disk_trials(args.trials, rng)
        if isinstance(f, str):
            print(f"full disk: {f}")
        else:
            print(f"full disk (tmpfs of 8 MB, 0 to 64 kB free): {f['trials']} trials, {f['lost']} records lost, "
                  f"{f['temp_left']} temp files left, {f['refused']} saves refused, {f['saved']} saved whole")
            for m in sorted(f["messages"]):
                print(f"  refused with: {m}")
        session.results = {"seed": args.seed, "kill": k, "full_disk": f}


if __name__ == "__main__":
    main()
