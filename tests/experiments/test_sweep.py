"""Sweeps end to end: identical results with 1 worker, 2 workers and Dask; resume after SIGKILL;
failed runs recorded and retried; diverged runs; time budgets; progress output."""

import io
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from echosim.experiments import store as results
from echosim.experiments import assemble
from echosim.experiments.config import load_config, parse_config
from echosim.training.runner import run_many
from echosim.experiments.progress import Progress
from echosim.experiments.sweep import estimate, run_sweep
from echosim.experiments.assemble import execute_run

TINY = {
    "problem": {"kind": "logistic", "dim": 3, "radius": 0.5, "w_star_norm": 3.0},
    "pipeline": {"arrival": {"kind": "gamma", "mean": 3.0, "cv": 0.5}},
    "optimizer": {"lr": [1.0, 4.0], "batch_size": 8, "echo": [1, 3]},
    "sweep": {"n_batches": 60, "repetitions": 2, "name": "tiny", "lr_extend": 0},
}
VOLATILE = ["elapsed_s"]  # the only column that depends on the machine's timing


def frames_equal(a, b):
    pd.testing.assert_frame_equal(a.drop(columns=VOLATILE, errors="ignore").reset_index(drop=True),
                                  b.drop(columns=VOLATILE, errors="ignore").reset_index(drop=True),
                                  check_exact=True)


@pytest.fixture(scope="module")
def tiny_conf():
    return parse_config(TINY)


@pytest.fixture(scope="module")
def serial(tiny_conf, tmp_path_factory):
    return run_sweep(tiny_conf, out=tmp_path_factory.mktemp("serial"), workers=1, progress=False)


def test_a_sweep_runs_every_run_and_tunes_per_setting(serial, tiny_conf):
    assert serial.counts == {"ok": 8, "diverged": 0, "failed": 0, "missing": 0}
    assert len(serial.summary) == 8 and len(serial.tuned) == 2
    assert set(serial.tuned["optimizer.lr"]) <= {1.0, 4.0}
    assert (serial.out / "manifest.json").exists()
    assert serial.summary["conv_time"].notna().all()  # a pipeline gives a wall-clock


def test_a_sweep_result_shows_itself_in_a_notebook(serial):
    page = serial._repr_html_()
    assert page.startswith("<p><b>") and "<table" in page
    # the columns say what they count and in which unit, as the text table does
    assert "T to target (fresh batches)" in page and "wall-clock to target (simulated time units)" in page
    assert "conv_batches" not in page and "conv_time" not in page
    assert "In words:" in page and "B = 8: echoing" in page


def test_two_workers_give_bitwise_identical_tables(serial, tiny_conf, tmp_path):
    par = run_sweep(tiny_conf, out=tmp_path, workers=2, progress=False)
    frames_equal(par.summary, serial.summary)
    frames_equal(par.curves, serial.curves)
    frames_equal(par.tuned, serial.tuned)


def test_dask_local_cluster_gives_identical_tables(serial, tiny_conf, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        res = run_sweep(tiny_conf, out=tmp_path, scheduler=cluster.scheduler_address, progress=False)
    frames_equal(res.summary, serial.summary)
    frames_equal(res.curves, serial.curves)


def test_common_random_numbers_the_batch_cache_changes_nothing(tiny_conf):
    spec = tiny_conf.runs[0]
    payload = execute_run(spec)  # through the per-process batch cache
    from echosim.experiments.specs import build_optimizer, build_pipeline, build_problem
    from echosim.pipeline.schedule import simulate
    from echosim.training.problems import Logistic

    fresh = Logistic(**{k: v for k, v in spec.problem.items() if k != "kind"})  # no cache attached
    schedule = simulate(build_pipeline(spec.pipeline, spec.echo), 60, seed=spec.pipeline_seed)
    # run_many, as execute_run: run() agrees with it only to rounding (sums go in another order)
    [traj] = run_many(fresh, [build_optimizer(spec.optimizer)], batch_size=8, echo=schedule, seed=spec.seed,
                      log=np.arange(1, 61))
    np.testing.assert_array_equal(payload["curves"]["risk"], traj.risk)
    np.testing.assert_array_equal(payload["curves"]["time"], traj.time)
    assert build_problem(spec.problem) is build_problem(dict(spec.problem))


def test_a_sweep_with_one_more_value_computes_only_the_new_runs(serial, tiny_conf, tmp_path):
    smaller = parse_config({**TINY, "optimizer": dict(TINY["optimizer"], lr=[1.0])})
    first = run_sweep(smaller, out=tmp_path / "a", workers=1, progress=False)
    assert first.n_new == 4
    again = run_sweep(tiny_conf, out=tmp_path / "b", workers=1, progress=False)  # lr = [1, 4]: 4 new runs
    assert again.n_new == 4 and again.n_resumed == 4
    frames_equal(again.summary, serial.summary)
    frames_equal(again.curves, serial.curves)
    assert run_sweep(tiny_conf, out=tmp_path / "b", workers=1, progress=False).n_new == 0


def test_runs_live_in_few_packs_not_a_file_per_run(tiny_conf, tmp_path, private_run_store):
    run_sweep(tiny_conf, out=tmp_path, workers=2, progress=False)
    packs = list((private_run_store / "packs").glob("*.parquet"))
    assert 1 <= len(packs) < len(tiny_conf.runs)
    assert results.Store(private_run_store).finished() == {r.run_id for r in tiny_conf.runs}


def test_a_corrupt_pack_is_quarantined_and_its_runs_recomputed(serial, tiny_conf, tmp_path, private_run_store):
    run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False)
    (pack,) = (private_run_store / "packs").glob("*.parquet")
    pack.write_bytes(pack.read_bytes()[: pack.stat().st_size // 2])  # a half-written disk block
    err = io.StringIO()
    again = run_sweep(tiny_conf, out=tmp_path, workers=1, stream=err)
    assert again.n_new == len(tiny_conf.runs)
    assert "unreadable pack" in err.getvalue() and len(list((private_run_store / "quarantine").iterdir())) == 1
    frames_equal(again.summary, serial.summary)


def test_garbage_in_the_middle_of_a_pack_is_quarantined_and_its_runs_recomputed(serial, tiny_conf, tmp_path,
                                                                                 private_run_store):
    import pyarrow.parquet as pq

    run_sweep(tiny_conf, out=tmp_path / "a", workers=1, progress=False)
    (pack,) = (private_run_store / "packs").glob("*.parquet")
    risk = [c for c in (pq.ParquetFile(pack).metadata.row_group(0).column(i) for i in range(8))
            if c.path_in_schema == "risk"][0]
    data = bytearray(pack.read_bytes())
    mid = risk.data_page_offset + risk.total_compressed_size // 2
    data[mid:mid + 64] = bytes(range(64))  # the footer stays intact: the pack still lists its runs
    pack.write_bytes(bytes(data))
    err = io.StringIO()
    again = run_sweep(tiny_conf, out=tmp_path / "b", workers=1, stream=err)
    assert again.n_new == len(tiny_conf.runs) and "unreadable pack" in err.getvalue()
    frames_equal(again.summary, serial.summary)  # recomputed exactly, nothing read from the garbage
    assert len(list((private_run_store / "quarantine").iterdir())) == 1


def test_the_report_says_what_ran_dask_is_not_named_when_nothing_was_computed(tiny_conf, tmp_path):
    first = run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False)
    assert first.n_new == len(tiny_conf.runs) and first.scheduler is None
    again = run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False, scheduler="tcp://127.0.0.1:1")
    assert again.n_new == 0 and again.scheduler is None  # every run was stored: no cluster was contacted


def test_a_scheduler_that_does_not_answer_is_one_error_not_a_wait(tiny_conf, tmp_path):
    import socket

    pytest.importorskip("distributed")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match=f"cannot connect to the Dask scheduler at 'tcp://127.0.0.1:{port}'"):
        run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False, scheduler=f"127.0.0.1:{port}",
                  store_dir=tmp_path / "empty-store")


@pytest.mark.parametrize("address", ["not-an-address", "tcp://host", "tcp://:8786", "tcp://h:99999", "",
                                     "http://h:1", "tcp://h:port"])
def test_a_malformed_scheduler_address_is_refused_before_any_work(tiny_conf, tmp_path, address):
    from echosim.experiments.executors import check_scheduler

    with pytest.raises(ValueError, match="scheduler"):
        check_scheduler(address)
    with pytest.raises(ValueError, match="scheduler"):
        run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False, scheduler=address)
    assert not (tmp_path / "manifest.json").exists()
    assert check_scheduler("127.0.0.1:8786") == "tcp://127.0.0.1:8786" == check_scheduler("tcp://127.0.0.1:8786")


def test_a_link_planted_as_the_lock_file_is_refused_never_truncated(tiny_conf, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".lock").symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        run_sweep(tiny_conf, out=out, workers=1, progress=False)
    assert victim.read_text() == "precious"


def test_a_second_sweep_on_the_same_directory_is_told_it_is_busy(tiny_conf, tmp_path):
    import fcntl

    tmp_path.mkdir(exist_ok=True)
    with open(tmp_path / ".lock", "w") as f:  # what a running sweep holds
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        with pytest.raises(ValueError, match="in use by another sweep"):
            run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False)
    assert run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False).n_new == len(tiny_conf.runs)


def test_a_failed_run_is_recorded_not_cached_and_retried(tiny_conf, tmp_path, monkeypatch):
    victim = tiny_conf.runs[2].run_id
    real = assemble._result

    def flaky(spec, *args):
        if spec.run_id == victim:
            raise RuntimeError("injected failure\nsecond line")
        return real(spec, *args)

    monkeypatch.setattr(assemble, "_result", flaky)
    rep = run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False)
    row = rep.summary.set_index("run_id").loc[victim]
    assert row["status"] == "failed" and row["error"] == "RuntimeError: injected failure second line"
    assert row["conv_batches"] == math.inf and rep.counts["failed"] == 1
    store = results.Store()
    assert victim not in store.finished() and store.failure(victim)["error"].startswith("RuntimeError")
    monkeypatch.setattr(assemble, "_result", real)
    again = run_sweep(tiny_conf, out=tmp_path, workers=1, progress=False)
    assert again.n_new == 1 and again.counts["failed"] == 0
    assert results.Store().failure(victim) is None


def test_diverged_runs_count_as_never_converging(tmp_path):
    conf = parse_config({"problem": {"kind": "least_squares", "dim": 3, "decay": 0.0},
                         "optimizer": {"lr": [0.1, 50.0], "batch_size": 4, "echo": 2},
                         "sweep": {"n_batches": 50, "atol": 0.05, "lr_extend": 0}})
    rep = run_sweep(conf, out=tmp_path, workers=1, progress=False)
    bad = rep.summary[rep.summary["optimizer.lr"] == 50.0].iloc[0]
    assert bad["status"] == "diverged" and bad["conv_batches"] == math.inf and not bad["converged"]
    assert np.isfinite(rep.curves["risk"]).all()
    assert rep.tuned.iloc[0]["optimizer.lr"] == 0.1


def test_time_budget_runs_stop_at_the_budget_and_other_policies_work(tmp_path):
    conf = parse_config({"problem": {"kind": "logistic", "dim": 3},
                         "pipeline": {"arrival": {"kind": "exponential", "mean": 4.0},
                                      "policy": ["greedy", "example", "sync"], "shuffle_buffer": 16},
                         "optimizer": {"lr": 1.0, "batch_size": 4, "echo": 2},
                         "sweep": {"time_budget": 200.0, "atol": 0.02}})
    rep = run_sweep(conf, out=tmp_path, workers=1, progress=False)
    assert rep.counts["ok"] == 3
    for rid, g in rep.curves.groupby("run_id", observed=True):
        assert g["time"].max() <= 200.0 and g["time"].max() > 150.0
    greedy = rep.summary[rep.summary["pipeline.policy"] == "greedy"].iloc[0]
    assert greedy["mean_echo"] >= 1 and math.isnan(greedy["optimizer.echo"])


KILL_TOML = """
[problem]
kind = "logistic"
dim = 20
[optimizer]
lr = [0.3, 1.0, 3.0, 10.0]
batch_size = 256
echo = [1, 2, 4, 8]
[sweep]
n_batches = 200
repetitions = 16   # 16 tasks (a cell per data seed): far from done when the first runs report
name = "kill"
lr_extend = 0
"""


def start_sweep(cfg: Path, out: Path) -> subprocess.Popen:
    """A CLI sweep in its own session, logging one stderr line per finished run."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.Popen([sys.executable, "-m", "echosim", "sweep", str(cfg), "--out", str(out),
                             "--workers", "2", "--quiet", "--verbose", "--no-plot"], env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_finished_runs(proc: subprocess.Popen, n: int) -> None:
    """Block until the sweep reports `n` finished runs (an event, not a clock)."""
    seen = 0
    for line in proc.stderr:
        seen += line.startswith("run ")
        if seen >= n:
            return
    raise AssertionError(f"the sweep exited after {seen} runs; make it longer")


def session_members(sid: int) -> list[int]:
    """Pids of the live (not zombie) processes of session `sid`."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            pids.append(int(d.name))
    return pids


def open_pidfds(pids) -> list[int]:
    """pidfds of the processes of `pids` still there (one already reaped is gone)."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            pass
    return fds


def wait_until_exited(fds, what: str) -> None:
    """Block until every pidfd in `fds` reports its process's exit (an event, not a clock)."""
    import select

    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    try:
        left = len(fds)
        while left:
            events = poller.poll(60_000)  # a bound for a broken build, not a synchronisation
            assert events, what
            for fd, _ in events:
                poller.unregister(fd)
                left -= 1
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.skipif(not hasattr(os, "pidfd_open") or not Path("/proc/self/stat").exists(),
                    reason="needs Linux pidfds and /proc")
def test_resume_after_sigkill_loses_and_duplicates_nothing(tmp_path):
    cfg = tmp_path / "kill.toml"
    cfg.write_text(KILL_TOML)
    conf = load_config(cfg)
    killed = tmp_path / "killed"
    proc = start_sweep(cfg, killed)
    try:
        wait_for_finished_runs(proc, 4)
        members = open_pidfds(session_members(proc.pid))
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, like a machine going down
        proc.wait()
        wait_until_exited(members, "the sweep's processes outlived SIGKILL")  # a late worker holds --out's lock
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    store = results.Store()
    done_before = len(store.finished())
    assert 4 <= done_before < len(conf.runs)
    assert len(store.read(store.finished())) == done_before and not store.quarantined  # every pack is readable
    resumed = run_sweep(conf, out=killed, workers=2, progress=False)
    assert resumed.n_resumed == done_before and resumed.n_new == len(conf.runs) - done_before
    assert list(resumed.summary["run_id"]) == [r.run_id for r in conf.runs]  # none lost, none twice
    clean = run_sweep(conf, out=tmp_path / "clean", workers=2, progress=False, store_dir=tmp_path / "fresh")
    frames_equal(resumed.summary, clean.summary)
    frames_equal(resumed.curves, clean.curves)
    assert not [p for p in store.root.rglob("*.tmp")]


@pytest.mark.skipif(not hasattr(os, "pidfd_open") or not Path("/proc/self/stat").exists(),
                    reason="needs Linux pidfds and /proc")
def test_workers_die_with_the_sweep_when_only_the_parent_is_killed(tmp_path):
    cfg = tmp_path / "kill.toml"
    cfg.write_text(KILL_TOML)
    proc = start_sweep(cfg, tmp_path / "out")
    try:
        wait_for_finished_runs(proc, 2)
        workers = [pid for pid in session_members(proc.pid) if pid != proc.pid]
        assert len(workers) == 2
        pidfds = [os.pidfd_open(pid) for pid in workers]
        os.kill(proc.pid, signal.SIGKILL)  # the parent alone, as an OOM killer would
        proc.wait()
        wait_until_exited(pidfds, f"workers {session_members(proc.pid)} outlived their parent")
        assert session_members(proc.pid) == []
    finally:
        for pid in session_members(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.stderr.close()


def test_progress_is_a_bar_on_a_terminal_and_lines_otherwise():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = Progress(3, stream=tty)
    for _ in range(3):
        bar.update()
    assert "\r" in tty.getvalue() and "3/3" in tty.getvalue() and "run/s" in tty.getvalue()
    plain = io.StringIO()
    bar = Progress(3, stream=plain, every=1e9)
    for _ in range(3):
        bar.update()
    assert plain.getvalue().splitlines() == [plain.getvalue().strip()]  # only the final line
    assert " 3/3 " in plain.getvalue() and "\r" not in plain.getvalue()
    plain = io.StringIO()
    bar = Progress(4, stream=plain, every=0.0)
    for _ in range(4):
        bar.update()
    lines = plain.getvalue().splitlines()
    assert [line.split("|")[2].split()[0] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]


def test_progress_can_be_silenced_and_ends_its_line_on_an_interrupt():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    quiet = Tty()
    with Progress(5, stream=quiet, enabled=False) as bar:
        bar.update(5)
    assert quiet.getvalue() == ""
    tty = Tty()
    with pytest.raises(KeyboardInterrupt):
        with Progress(5, stream=tty, desc="plan", unit="sweep") as bar:
            bar.update(2)
            raise KeyboardInterrupt
    assert tty.getvalue().endswith("\n") and "plan  40%" in tty.getvalue() and "2/5" in tty.getvalue()


def test_a_sweep_shows_progress_lines_through_the_api_and_none_when_silenced(tiny_conf, tmp_path):
    log = io.StringIO()
    run_sweep(tiny_conf, out=tmp_path / "a", workers=1, stream=log)
    assert f" {len(tiny_conf.runs)}/{len(tiny_conf.runs)} " in log.getvalue()
    log = io.StringIO()
    run_sweep(tiny_conf, out=tmp_path / "b", workers=1, stream=log, progress=False, store_dir=tmp_path / "s")
    assert log.getvalue() == ""


def test_a_sweep_names_its_bar(tiny_conf, tmp_path):
    log = io.StringIO()
    run_sweep(tiny_conf, out=tmp_path / "a", workers=1, stream=log, store_dir=tmp_path / "s")
    assert log.getvalue().splitlines()[-1].startswith("tiny 100%|")  # the config's name by default
    log = io.StringIO()
    run_sweep(tiny_conf, out=tmp_path / "b", workers=1, stream=log, store_dir=tmp_path / "t", desc="figure 9")
    assert log.getvalue().splitlines()[-1].startswith("figure 9 100%|")


def test_on_a_narrow_terminal_the_bar_shortens_its_name_to_fit(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "60")
    tty = Tty()
    with Progress(10, stream=tty, desc="plan 1/1 B=256: sync, budget 375 fresh batches") as bar:
        bar.update(10)
    lines = [line for line in tty.getvalue().replace("\n", "\r").split("\r") if line]
    assert lines and all(len(line) <= 59 for line in lines) and lines[-1].startswith("plan")
    assert "…" in lines[-1] and "10/10" in lines[-1]


def test_in_a_notebook_the_bar_is_tqdms_widget_and_falls_back_to_lines(monkeypatch):
    import sys
    import types

    from echosim.experiments import progress as prog

    made = []

    class FakeTqdm:
        def __init__(self, total, unit, desc, leave):
            self.total, self.desc, self.n, self.closed = total, desc, 0, False
            made.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    module = types.ModuleType("tqdm.notebook")
    module.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.notebook", module)
    monkeypatch.setattr(prog, "_in_notebook", lambda: True)
    with Progress(3, desc="figure speedup_vs_R") as bar:
        bar.update(3)
    assert made and made[0].desc == "figure speedup_vs_R" and made[0].n == 3 and made[0].closed
    log = io.StringIO()  # a stream given: lines on it, never the widget
    Progress(2, stream=log, every=0.0).update(2)
    assert len(made) == 1 and "2/2" in log.getvalue()

    class Broken:  # tqdm's notebook bar without ipywidgets: "IProgress not found"
        def __init__(self, **kw):
            raise ImportError("IProgress not found. Please update jupyter and ipywidgets.")

    module.tqdm = Broken
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    bar = Progress(2, every=0.0)
    bar.update(2)
    assert "2/2" in err.getvalue()  # the plain lines, no crash
    monkeypatch.setitem(sys.modules, "tqdm.notebook", None)  # tqdm not installed at all
    bar = Progress(1, every=0.0)
    bar.update()
    assert "1/1" in err.getvalue().splitlines()[-1]


def test_estimate_calibrates_a_cost_model(tiny_conf, tmp_path):
    est = estimate(tiny_conf, out=tmp_path, workers=2)
    assert est["n_pending"] == 8 and est["seconds"] > 0 and "calibrated" in est["method"]


def test_execute_run_reports_errors_instead_of_raising(tiny_conf):
    import dataclasses

    spec = dataclasses.replace(tiny_conf.runs[0], optimizer=dict(tiny_conf.runs[0].optimizer, method="nope"))
    p = execute_run(spec)
    assert p["summary"]["status"] == "failed" and p["curves"] is None and "nope" in p["summary"]["error"]


def test_a_tuned_lr_at_the_edge_of_its_grid_extends_the_grid_until_bracketed(tmp_path):
    from echosim.experiments.sweep import LR_RATIO

    conf = parse_config({"problem": {"kind": "logistic", "dim": 5, "radius": 1.0},
                         "optimizer": {"lr": [0.1, 0.2], "batch_size": 256, "echo": [1, 4]},
                         "sweep": {"n_batches": 150, "repetitions": 2, "lr_extend": 12}})
    rep = run_sweep(conf, out=tmp_path, workers=1, progress=False)
    assert rep.n_runs > len(conf.runs)  # the grid grew
    assert (rep.tuned["lr_edge"] == "").all() and (rep.tuned["optimizer.lr"] > 0.2).all()
    lrs = np.sort(rep.summary["optimizer.lr"].unique())
    np.testing.assert_allclose(lrs[2:] / lrs[1:-1], LR_RATIO)  # past the edge: the paper's ratio
    capped = run_sweep(parse_config({"problem": {"kind": "logistic", "dim": 5, "radius": 1.0},
                                     "optimizer": {"lr": [0.1, 0.2], "batch_size": 256, "echo": [1, 4]},
                                     "sweep": {"n_batches": 150, "repetitions": 2, "lr_extend": 0}}),
                       out=tmp_path / "capped", workers=1, progress=False)
    assert (capped.tuned["lr_edge"] == "high").all()  # without extension the edge is flagged


def test_the_default_sweep_shows_both_regimes_with_every_tuned_lr_inside_its_grid(tmp_path):
    from echosim.experiments.config import default_config

    rep = run_sweep(default_config(quick=True), out=tmp_path, workers=2, progress=False)
    t = rep.tuned.set_index(["optimizer.batch_size", "optimizer.echo"])
    assert (t["lr_edge"] == "").all() and t["optimizer.lr"].notna().all()  # a tuned lr, interior to its grid
    small, large = t.loc[4], t.loc[2048]
    # noise-dominated: fresh batches flat in K, tuned lr falling about as 1/K
    assert small["conv_batches"].max() <= 1.25 * small["conv_batches"].min()
    assert 4 <= small["optimizer.lr"].iloc[0] / small["optimizer.lr"].iloc[-1] <= 64  # K from 1 to 16
    # curvature-dominated: echoing saves fresh batches (and wall-clock behind the R = 8 loader)
    assert large["conv_batches"].iloc[-1] <= large["conv_batches"].iloc[0] / 4
    assert large["conv_time"].loc[4] < large["conv_time"].loc[1] / 2
    # the answer in words, one sentence per batch size, and the report around it
    from echosim.experiments import report

    words = rep.in_words()
    assert len(words) == 2 and words[0].startswith("B = 4: echoing buys nothing")
    assert words[1].startswith("B = 2048: echoing at K = ") and "sooner in wall-clock" in words[1]
    text = report.format_tuned(rep.tuned, default_config(quick=True), rep.summary) + report.regime_check(
        rep.tuned, rep.summary, default_config(quick=True).settings)
    assert "x fewer with echoing" not in text and "T of each seed at lr*" in text
    assert "above 1/β = 4" in text  # the tuned steps at B = 2048 lie outside the theory's range, and it says so
    assert "act on the simulated K_sat" in text


def test_dask_gives_bitwise_the_local_tables_on_a_real_data_set_too(tmp_path):
    """Dask workers run with one BLAS thread (OMP_NUM_THREADS=1), the local sweep with the
    default: the data-set risk (matrix products) must not depend on it."""
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("sklearn")
    conf = parse_config({"problem": {"kind": "dataset", "name": "breast_cancer", "l2": 0.01},
                         "optimizer": {"lr": [0.1, 0.5], "batch_size": 16, "echo": [1, 4]},
                         "sweep": {"n_batches": 60, "repetitions": 2, "lr_extend": 0}})
    local = run_sweep(conf, out=tmp_path / "local", workers=1, progress=False, store_dir=tmp_path / "s1")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        remote = run_sweep(conf, out=tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False,
                           store_dir=tmp_path / "s2")
    frames_equal(remote.summary, local.summary)
    frames_equal(remote.curves, local.curves)


def test_T_does_not_depend_on_the_budget_or_on_logging_within_batches(tmp_path):
    """The same runs (same seeds, lrs, K) at three budgets, logged every batch or every step:
    every run that converged within the shortest budget has the same T in all of them."""
    base = {"problem": {"kind": "logistic", "dim": 5, "design": "gaussian", "decay": 0.5, "w_star_norm": 3.0},
            "optimizer": {"lr": [0.5, 2.0, 8.0], "batch_size": 512, "echo": [1, 4]},
            "sweep": {"repetitions": 3, "lr_extend": 0, "log_every": 1}}
    tables = {}
    for unit in ("batch", "step"):
        for n in (60, 120, 240):
            conf = parse_config({**base, "sweep": dict(base["sweep"], n_batches=n, log_unit=unit)})
            rep = run_sweep(conf, out=tmp_path / f"{unit}{n}", workers=1, progress=False, store_dir=tmp_path / "s")
            s = rep.summary.set_index(["optimizer.lr", "optimizer.echo", "repetition"]).sort_index()
            tables[(unit, n)] = s["conv_batches"]
    short = tables[("batch", 60)]
    done = short[np.isfinite(short) & (short + 20 <= 60)]
    assert len(done) >= 6  # enough runs converge to make the check bite
    for key, t in tables.items():
        np.testing.assert_array_equal(t.loc[done.index].to_numpy(), done.to_numpy(), err_msg=str(key))
    # runs that needed more than the short budget allows converge later, at a T the long budgets agree on
    late = tables[("batch", 240)][np.isfinite(tables[("batch", 240)]) & ~np.isfinite(short)]
    np.testing.assert_array_equal(tables[("step", 240)].loc[late.index].to_numpy(), late.to_numpy())


def test_the_cost_model_prices_a_data_set_risk_point_by_its_evaluation_rows():
    """A data set's risk is computed on its `eval_rows` subsample, so the estimate's
    per-point term grows with those rows, not with the table (the figure-1 sweep's
    estimate was 20x the measured time when it counted the whole table)."""
    pytest.importorskip("sklearn")
    from echosim.experiments.sweep import _cost_units

    def per_point(eval_rows):
        problem = {"kind": "dataset", "name": "breast_cancer", "l2": 0.01}
        if eval_rows:
            problem["eval_rows"] = eval_rows
        spec = parse_config({"problem": problem, "optimizer": {"lr": 0.1, "batch_size": 16},
                             "sweep": {"n_batches": 100, "repetitions": 1, "log_every": 1}}).runs[0]
        every = _cost_units(spec)
        sparse = _cost_units(_logged_every(spec, 100))
        return (every - sparse) / 100  # ~ one logged point's price

    whole, sub = per_point(None), per_point(50)
    assert whole / sub == pytest.approx(569 / 50, rel=0.05)  # breast_cancer: 569 rows


def _logged_every(spec, every):
    import dataclasses

    return dataclasses.replace(spec, run=dict(spec.run, log_every=every))
