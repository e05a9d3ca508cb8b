"""plan(): form (b) against closed forms of the pipeline (deterministic times), timing per
batch size and from a run's records, speedups against the right baseline, the best per
batch size, form (a) end to end on a small problem, output for terminals and notebooks,
and bad input."""

import json
import math

import numpy as np
import pytest

from echosim.planner import plan
from echosim.loop.echoing import echoing
from echosim.loop.records import Records
from echosim.planner.response import t_one
from echosim.training.methods import METHODS

S, E = 200.0, 2e5
STEPS = {B: float(t_one(S, E, B)) for B in (64, 1024)}


def by(p, policy, echo=None, B=None):
    return next(c for c in p.candidates if c["policy"] == policy and (echo is None or c["echo"] == echo)
                and (B is None or c["batch_size"] == B))


def response_of(p):
    from echosim.planner.response import fit_response

    return fit_response({k: v for k, v in STEPS.items()}, seed=p.inputs["seed"])


def test_form_b_wall_clock_matches_the_closed_form_of_a_deterministic_pipeline():
    # loader 80 ms, step 10 ms: R = 8. Steady state: a batch every max(80 ms, K·10 ms) (Choi et al.)
    p = plan("80ms", "10ms", batch_size=256, steps_to_target=STEPS, echoes=[2, 8, 16], seeds=2)
    fit = response_of(p)
    for c in p.candidates:
        if c["policy"] == "greedy":
            continue
        K = c["echo"]
        T = math.ceil(fit.predict(K, 256))
        assert c["batches_to_target"] == T
        per_batch = max(0.08, K * 0.01)
        # the first batch arrives after one loader time; then one batch per period
        assert c["wall_clock_to_target"] == pytest.approx(0.08 + (T - 1) * per_batch + K * 0.01, rel=0.02)
        assert c["utilization"] == pytest.approx(min(1.0, K * 0.01 / 0.08), rel=0.05)
        assert c["speedup_ceiling"] == pytest.approx(K * 0.08 / per_batch, rel=0.02)
        assert c["speedup"] <= c["speedup_ceiling"] * (1 + 1e-9)
    assert by(p, "fixed", 16)["speedup"] < by(p, "fixed", 8)["speedup"]  # K > R: each batch costs K steps
    # greedy under a deterministic R = 8 takes 8 steps per batch, like fixed K = 8
    assert by(p, "greedy")["echo"] == pytest.approx(8, rel=0.02)
    assert by(p, "greedy")["batches_to_target"] == by(p, "fixed", 8)["batches_to_target"]


def test_form_b_recommends_no_echo_when_the_loader_keeps_up():
    p = plan("5ms", "10ms", batch_size=256, steps_to_target=STEPS, seeds=2)
    assert "T(1, B) = S + E/B" in p.source and "prior only" in p.source
    assert p.recommended["policy"] == "sync"
    assert "do not echo" in p.reason and "keeps up" in p.reason


def test_step_time_per_batch_size():
    """15 ms at B = 64 and 40 ms at B = 512: at B = 512 the loader (80 ms) is only 2 steps, so
    K = 8 costs wall-clock there but not at B = 64."""
    p = plan("80ms", {64: "15ms", 512: "40ms"}, batch_size=[64, 512], steps_to_target=STEPS, echoes=[2, 8],
             seeds=1, policies="sync,fixed")
    assert by(p, "sync", B=64)["R"] == pytest.approx(0.08 / 0.015)
    assert by(p, "sync", B=512)["R"] == pytest.approx(2.0)
    assert by(p, "fixed", 8, B=512)["utilization"] == pytest.approx(1.0, rel=0.02)
    assert by(p, "fixed", 8, B=512)["speedup_ceiling"] == pytest.approx(8 * 0.08 / (8 * 0.04), rel=0.02)


def test_speedups_are_against_sync_at_the_same_batch_size_and_workers():
    p = plan("80ms", "10ms", batch_size=[256, 1024], workers=[1, 4], steps_to_target=STEPS, echoes=[4], seeds=1,
             policies="sync,fixed")
    for c in p.candidates:
        base = by(p, "sync", B=c["batch_size"]) if c["workers"] == 1 else next(
            b for b in p.candidates if b["policy"] == "sync" and b["batch_size"] == c["batch_size"] and b["workers"] == 4)
        assert c["baseline_wall_clock"] == base["wall_clock_to_target"]
        assert c["speedup"] == pytest.approx(base["wall_clock_to_target"] / c["wall_clock_to_target"])
        assert c["speedup"] <= c["speedup_ceiling"] * (1 + 1e-9)


def test_several_batch_sizes_give_the_best_per_batch_size_and_overall():
    p = plan("80ms", "10ms", batch_size=[64, 1024], steps_to_target=STEPS, echoes=[2, 8], seeds=1)
    assert set(p.best) == {64, 1024}
    for B, c in p.best.items():
        mine = [x for x in p.candidates if x["batch_size"] == B]
        assert c["wall_clock_to_target"] <= 1.03 * min(x["wall_clock_to_target"] for x in mine)
    assert p.recommended in p.best.values()
    text = p.table()
    assert "best at B = 64:" in text and "best at B = 1024:" in text and "recommended overall:" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_an_echoed_measurement_changes_the_plan_where_it_was_taken():
    """With K = 1 only, what echoing saves at B = 1024 is unknown; a pilot measuring K = 8
    there at nearly the 8-fold saving makes echoing the clear answer."""
    pilot = {**STEPS, (1024, 8): 8 * 0.135 * STEPS[1024]}
    p = plan("80ms", "10ms", batch_size=1024, steps_to_target=pilot, echoes=[8], seeds=2, policies="sync,fixed")
    c = by(p, "fixed", 8)
    assert c["batches_to_target"] == pytest.approx(0.135 * STEPS[1024], rel=0.1)
    assert "posterior" in p.source and p.recommended["policy"] == "fixed"


def test_at_one_learning_rate_the_plan_stays_within_the_measured_echo():
    """Form (b) plans a loop that keeps its learning rate: past the largest K measured with
    echoing (here K = 4) no gain is credited, so a larger fixed K never comes out sooner,
    greedy is capped at that K (and the notes say why), and the reason says to pilot 2K;
    with K = 1 measurements alone nothing is held and greedy keeps `max_echo`."""
    pilot = {**STEPS, (1024, 4): 4 * 0.3 * STEPS[1024]}
    p = plan("80ms", "10ms", batch_size=1024, steps_to_target=pilot, echoes=[2, 4, 8], seeds=2)
    assert by(p, "fixed", 8)["batches_to_target"] == by(p, "fixed", 4)["batches_to_target"]
    assert by(p, "fixed", 8)["wall_clock_to_target"] >= by(p, "fixed", 4)["wall_clock_to_target"]
    assert by(p, "greedy")["max_echo"] == 4
    assert any(n.startswith("greedy is capped at K = 4") for n in p.notes)
    assert "up to K = 4" in p.source
    q = plan("80ms", "10ms", batch_size=1024, steps_to_target=pilot, echoes=[4, 8], seeds=2, policies="sync,fixed")
    assert q.recommended["echo"] == 4 and "pilot K = 8 to see whether it pays" in q.reason
    prior = plan("80ms", "10ms", batch_size=1024, steps_to_target=STEPS, echoes=[4, 8], seeds=2)
    assert by(prior, "greedy")["max_echo"] == 64 and not any(n.startswith("greedy is capped") for n in prior.notes)
    assert by(prior, "fixed", 8)["batches_to_target"] < by(prior, "fixed", 4)["batches_to_target"]


def test_steps_to_target_that_rise_with_the_batch_size_are_named():
    """T(1, B) = S + E/B never rises with B; single runs that do (more fresh batches at 2B)
    are named in a note, with their numbers, instead of being fitted silently."""
    p = plan("30ms", "15ms", batch_size=128, steps_to_target={128: 261, 256: 375}, seeds=1)
    (note,) = [n for n in p.notes if n.startswith("your steps to target without echoing rise")]
    assert "261 fresh batches at B = 128, 375 at B = 256" in note
    assert not any("rise with the batch size" in n for n in plan("80ms", "10ms", batch_size=256,
                                                                 steps_to_target=STEPS, seeds=1).notes)


def test_prices_compare_echoing_with_more_workers():
    p = plan("80ms", "10ms", batch_size=256, steps_to_target=STEPS, workers=[1, 8], echoes=[8], seeds=2,
             policies="sync,fixed", accelerator_price=3.0, worker_price=0.01)
    for c in p.candidates:
        assert c["cost"] == pytest.approx(c["wall_clock_to_target"] * (3.0 + 0.01 * c["workers"]) / 3600)
    cheapest = min(p.candidates, key=lambda c: c["cost"])
    assert p.recommended["cost"] <= 1.03 * cheapest["cost"] and "cost" in p.reason
    assert "cost/run" in p.table()


def test_json_has_the_documented_keys():
    p = plan("gamma(mean=80ms, cv=0.5)", "10ms", batch_size=[256, 512], steps_to_target=STEPS, seeds=2)
    d = json.loads(p.to_json())
    assert set(d["recommended"]) >= {"policy", "echo", "batch_size"}
    assert set(d["best_per_batch_size"]) == {"256", "512"}
    keys = {"policy", "echo", "batch_size", "batches_to_target", "steps_to_target", "wall_clock_to_target",
            "speedup", "utilization", "baseline_wall_clock"}
    assert d["candidates"] and all(keys <= set(c) for c in d["candidates"])
    for c in p.candidates:  # the band brackets the median
        assert c["wall_clock_low"] <= c["wall_clock_to_target"] <= c["wall_clock_high"]


def test_notebook_output_frame_html_and_a_figure_without_touching_the_backend(tmp_path):
    import matplotlib

    backend = matplotlib.get_backend()
    p = plan("80ms", "10ms", batch_size=256, steps_to_target=STEPS, echoes=[2, 8], seeds=1)
    df = p.to_frame()
    assert len(df) == len(p.candidates) and df["recommended"].sum() == 1
    for col in ("wall_clock_to_target_s", "wall_clock_low_s", "sync_wall_clock_s", "speedup_x",
                "fresh_batches_to_target", "accelerator_busy_fraction"):
        assert col in df.columns and col in df.attrs["units"], col
    assert "wall_clock_to_target" not in df.columns  # every time column says its unit
    labels = {"candidate", "policy", "recommended", "best_at_batch_size"}  # names and flags, no unit
    assert set(df.columns) - labels <= set(df.attrs["units"])  # every number has its unit
    assert repr(p).startswith("Plan(recommended=") and "speedup=" in repr(p) and len(repr(p)) < 200
    assert "<table>" in p._repr_html_() and "recommended" in p._repr_html_()
    fig = p.plot()
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure) and matplotlib.get_backend() == backend
    out = tmp_path / "plan.png"
    p.plot(out)
    assert out.stat().st_size > 0


def _record(policy, load, step, n=30, batch_size=256, censored=False):
    K = 1 if policy == "sync" else (4 if policy == "fixed" else 3)
    T = n
    return Records(policy=policy, echo=None if policy == "greedy" else K, batch_size=batch_size,
                   load_time=np.full(T, load), load_censored=np.full(T, censored), wait_time=np.zeros(T),
                   steps_per_batch=np.full(T, K, dtype=np.int64), cap=np.full(T, K, dtype=np.int64),
                   epoch=np.zeros(T, dtype=np.int64), step_batch=np.repeat(np.arange(T), K),
                   step_start=np.arange(T * K) * step, step_time=np.full(T * K, step), loss=np.full(T * K, np.nan))


def test_timing_from_records_is_taken_per_policy():
    """Under greedy the loader ran slower (40 ms vs 30 ms) and the step too (12 vs 10 ms):
    each candidate is timed by the run of its own policy, or the nearest one."""
    recs = [_record("sync", 0.03, 0.010), _record("greedy", 0.04, 0.012)]
    p = plan(records=recs, batch_size=256, steps_to_target=STEPS, echoes=[2], seeds=1)
    assert "in-run timing" in p.notes[0]
    assert by(p, "sync")["R"] == pytest.approx(0.03 / 0.010)
    sync, greedy = by(p, "sync"), by(p, "greedy")
    assert greedy["echo"] == pytest.approx(0.04 / 0.012, rel=0.1)
    assert any("fixed K=2 at B = 256: loader timed from the" in n and "model of step time in K" in n for n in p.notes)
    assert sync["throughput"] == pytest.approx(1 / 0.03, rel=0.05)


def test_records_of_a_real_loop_plan_end_to_end():
    it = echoing(range(40), "greedy", batch_size=128)
    for x in it:
        it.report(float(x))
    p = plan(records=[it.records()], batch_size=128, steps_to_target={64: 500, 1024: 80}, echoes=[2], seeds=1)
    assert p.recommended["batch_size"] == 128


@pytest.mark.parametrize("recs, kw, match", [
    ([_record("fixed", 0.03, 0.01, censored=True)], {}, "^records: no record measured the loader"),
    ([_record("sync", 0.03, 0.01, n=0)], {}, "^records: record 0 .* has no fresh batch"),
    ([_record("sync", 0.03, 0.01, batch_size=None)], {"batch_size": [128, 256]}, "^records: the batch size of record 0 is unknown"),
    ([_record("sync", 0.03, 0.01)], {"batch_size": 512}, "^records: no records at batch size 512"),
    ([_record("sync", 0.03, 0.01)], {"loader": "80ms"}, "^records: give either records"),
    ([_record("sync", 0.03, 0.01)], {"workers": [1, 2]}, "^workers: records time your loader as it ran"),
    ([42], {}, "^records: expected Records"),
    (["missing.npz"], {}, "^records: file 'missing.npz' does not exist"),
])
def test_bad_records(recs, kw, match):
    kw = {"batch_size": 256, **kw}
    with pytest.raises(ValueError, match=match):
        plan(records=recs, steps_to_target=STEPS, seeds=1, **kw)


def test_a_sync_loader_that_always_ran_ahead_keeps_up():
    p = plan(records=[_record("sync", 0.002, 0.01, censored=True)], batch_size=256, steps_to_target=STEPS, seeds=1)
    assert p.recommended["policy"] == "sync" and "keeps up" in p.reason


def test_form_a_simulates_every_candidate():
    p = plan("gamma(mean=40ms, cv=0.3)", "10ms", batch_size=1024, problem="logistic", echoes=[4], seeds=2,
             target=0.01, processes=1)
    assert [c["policy"] for c in p.candidates] == ["sync", "fixed", "greedy", "auto"]
    assert "stays there" in p.source
    for c in p.candidates:
        assert math.isfinite(c["wall_clock_to_target"]) and c["steps_to_target"] >= c["batches_to_target"]
        assert 0 < c["utilization"] <= 1
    sync, fixed = by(p, "sync"), by(p, "fixed")
    assert sync["steps_to_target"] == sync["batches_to_target"]
    assert sync["utilization"] == pytest.approx(0.25, rel=0.2)  # t_step / t_load
    assert fixed["steps_to_target"] == 4 * fixed["batches_to_target"]
    auto = by(p, "auto")  # simulated with the real loop's controller, its caps decided from the losses
    assert auto["caps"].startswith("0:1") and 1 <= auto["mean_echo"] <= 64  # it starts small
    assert any("auto: simulated with the controller echoing(policy='auto') runs" in n for n in p.notes)
    assert "auto (mean K" in p.table()
    # the recommendation is the fastest, up to the 3% preference for fewer steps
    assert p.recommended["wall_clock_to_target"] <= 1.03 * min(c["wall_clock_to_target"] for c in p.candidates)


def test_form_a_simulates_the_method_asked_for(monkeypatch):
    """heavy ball and Adam reach form (a)'s sweeps with their hyper-parameters (Adam on its
    own lr grid, not one scaled by 1/beta)."""
    import echosim.planner.simulated as sim

    seen = []
    real = sim.run_config

    def spy(data, *a, **k):
        seen.append(data["optimizer"])
        return real(data, *a, **k)

    monkeypatch.setattr(sim, "run_config", spy)
    p = plan("40ms", "10ms", batch_size=256, problem="least_squares", policies="sync,greedy", seeds=1,
             target=0.05, processes=1, method="echoed_heavy_ball", method_options={"momentum": 0.5})
    assert seen and all(o["method"] == "echoed_heavy_ball" and o["momentum"] == 0.5 for o in seen)
    assert "with echoed_heavy_ball, momentum 0.5" in p.source
    seen.clear()
    plan("40ms", "10ms", batch_size=256, problem="least_squares", policies="sync", seeds=1, target=0.05,
         processes=1, method="echoed_adam")
    start, stop, per_decade = METHODS["echoed_adam"].lr_grid
    assert all(o["method"] == "echoed_adam" and o["lr"] == {"start": start, "stop": stop, "per_decade": per_decade}
               for o in seen)


def test_unreachable_target_is_bad_input(monkeypatch):
    import echosim.planner.simulated as sim

    monkeypatch.setattr(sim, "_MAX_BUDGET", 80)
    with pytest.raises(ValueError, match="^target: no candidate reaches"):
        plan("40ms", "10ms", batch_size=16, problem="logistic", echoes=[2], seeds=1, policies="sync,fixed",
             target=1e-6, processes=1)


@pytest.mark.parametrize("kw, match", [
    ({"problem": "logistic", "steps_to_target": STEPS}, "^problem: give exactly one"),
    ({}, "^problem: give exactly one"),
    ({"problem": "quadratic"}, "^problem"),
    ({"steps_to_target": {64: 100}}, "^steps_to_target.*two or more"),
    ({"steps_to_target": {**STEPS, (64, 0): 100}}, "^steps_to_target.*echo factor K"),
    ({"problem": "logistic", "batch_size": 0}, "^batch_size"),
    ({"problem": "logistic", "batch_size": 10 ** 23}, "^batch_size: batch size 100,000,000,000,000,000,000,000 is more"),
    ({"steps_to_target": STEPS, "batch_size": [256, 10 ** 12]}, "^batch_size: batch size 1,000,000,000,000 is more"),
    ({"problem": "logistic", "batch_size": 10 ** 7}, "^batch_size: .*at most [0-9,]+ for 10 features"),
    ({"steps_to_target": {**STEPS, (256, 4): 3}}, "^steps_to_target: at B = 256, K = 4 .* at least K = 4 steps"),
    ({"steps_to_target": {**STEPS, (256, 10 ** 20): 10 ** 21}}, "^steps_to_target: the echo factor K in key .* <= 4096"),
    ({"problem": "logistic", "workers": 10 ** 7}, "^workers: expected at most 1,000,000"),
    ({"problem": "logistic", "max_echo": 10 ** 20}, "^max_echo"),
    ({"problem": "logistic", "policies": "sync,lazy"}, "^policies"),
    ({"steps_to_target": STEPS, "policies": "sync,auto"}, "^policies: 'auto'.*form \\(a\\)"),
    ({"problem": "logistic", "target": 0}, "^target"),
    ({"problem": "logistic", "accelerator_price": -1}, "^accelerator_price"),
    ({"problem": "logistic", "echoes": [0]}, "^echo"),
    ({"problem": "logistic", "processes": 0}, "^processes"),
    ({"problem": "logistic", "seeds": 0}, "^seeds"),
    ({"problem": "logistic", "seed": 2 ** 70}, "^seed must be an integer >= 0 and <= 9223372036854775807"),
    ({"problem": "logistic", "step_time": {64: "-5ms"}}, "^step_time"),
    ({"problem": "logistic", "step_time": {64: "40ms", 512: "5ms"}, "batch_size": 4096}, "^batch_size: the fitted step_time"),
    ({"problem": "logistic", "step_time": "10"}, "^step_time: '10' has no unit"),
    ({"problem": "logistic", "method": "adagrad"}, "^method must be one of"),
    ({"problem": "logistic", "method": "minibatch_sgd"}, "^method: minibatch_sgd takes one step"),
    ({"steps_to_target": STEPS, "method": "echoed_adam"}, "^method: the optimizer is simulated in form \\(a\\)"),
    ({"problem": "logistic", "method": "echoed_heavy_ball", "method_options": {"beta2": 0.9}},
     "^method_options: echoed_heavy_ball has momentum, got 'beta2'"),
    ({"problem": "logistic", "method": "echoed_heavy_ball", "method_options": {"momentum": 1.5}},
     "optimizer.momentum"),
])
def test_bad_input_names_the_argument(kw, match):
    kw = {"batch_size": 256, "step_time": "10ms", **kw}
    with pytest.raises(ValueError, match=match):
        plan("80ms", **kw)


def test_runs_that_fail_inside_a_plan_are_reported(monkeypatch, tmp_path, capsys):
    import echosim.experiments.assemble as assemble
    from echosim.cli import main

    real = assemble._setting

    def greedy_fails(spec):
        if spec.pipeline is not None and spec.pipeline.get("policy") == "greedy":
            raise FloatingPointError("greedy broke")
        return real(spec)

    monkeypatch.setattr(assemble, "_setting", greedy_fails)
    p = plan("40ms", "10ms", batch_size=256, problem="least_squares", policies="sync,greedy", seeds=1,
             target=0.05, processes=1, results=tmp_path / "store", progress=False)
    assert p.failed and {f["policy"] for f in p.failed} == {"greedy"}
    assert all("FloatingPointError: greedy broke" in f["error"] for f in p.failed)
    note, = [n for n in p.notes if "simulated run(s) failed" in n]
    assert note.startswith(f"{len(p.failed)} simulated run(s) failed ({len(p.failed)} greedy; first: greedy at B = 256")
    assert str(tmp_path / "store" / "failed") in note
    assert by(p, "greedy")["wall_clock_to_target"] == math.inf
    assert len(list((tmp_path / "store" / "failed").glob("*.json"))) == len(p.failed)
    assert p.to_dict()["failed_runs"][0]["policy"] == "greedy"
    # the command line prints the plan, says so on stderr in one line and exits 1
    code = main(["plan", "--loader", "40ms", "--step-time", "10ms", "--batch-size", "256", "--problem",
                 "least_squares", "--policies", "sync,greedy", "--seeds", "1", "--target", "0.05",
                 "--processes", "1", "--quiet", "--store", str(tmp_path / "store")])
    out, err = capsys.readouterr()
    assert code == 1 and "recommended" in out
    assert err.count("\n") == 1 and "run(s) failed (first: greedy at B = 256: FloatingPointError" in err
