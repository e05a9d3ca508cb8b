"""plan(): form (b) against closed forms of the pipeline (deterministic times), form (a)
end to end on a small problem, the recommendation, prices, JSON, and bad input."""

import json
import math

import pytest

from echosim.plan import plan
from echosim.plan.response import predict_batches

S, E = 200.0, 2e5
STEPS = {B: float(predict_batches("bound", S, E, 1, B)) for B in (64, 1024)}


def by(p, policy, echo=None):
    return next(c for c in p.candidates if c["policy"] == policy and (echo is None or c["echo"] == echo))


def test_form_b_wall_clock_matches_the_closed_form_of_a_deterministic_pipeline():
    # loader 80 ms, step 10 ms: R = 8. Steady state: a batch every max(80 ms, K·10 ms) (Choi et al.)
    p = plan("80ms", "10ms", batch_size=256, steps_to_target=STEPS, echoes=[2, 8, 16], seeds=2)
    for c in p.candidates:
        K = c["echo"]
        T = math.ceil(float(predict_batches("bound", S, E, K, 256)))
        assert c["batches_to_target"] == T
        per_batch = max(0.08, K * 0.01)
        # the first batch arrives after one loader time; then one batch per period
        assert c["wall_clock_to_target"] == pytest.approx(0.08 + (T - 1) * per_batch + K * 0.01, rel=0.02)
        assert c["utilization"] == pytest.approx(min(1.0, K * 0.01 / 0.08), rel=0.05)
        assert c["speedup_ceiling"] == pytest.approx(K * 0.08 / per_batch, rel=0.02)
    assert by(p, "fixed", 8)["speedup"] > by(p, "fixed", 2)["speedup"] > 1
    assert by(p, "fixed", 16)["speedup"] < by(p, "fixed", 8)["speedup"]  # K > R: each batch costs K steps
    assert p.recommended["policy"] in ("fixed", "greedy") and p.recommended["echo"] == pytest.approx(8, rel=0.05)


def test_form_b_recommends_no_echo_when_the_loader_keeps_up():
    p = plan("5ms", "10ms", batch_size=256, steps_to_target=STEPS, seeds=2)
    assert "bound model" in p.source and "90th percentile" in " ".join(p.notes)  # the default, and its accuracy
    assert p.recommended["policy"] == "sync"
    assert "do not echo" in p.reason and "keeps up" in p.reason


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
    keys = {"policy", "echo", "batch_size", "batches_to_target", "steps_to_target", "wall_clock_to_target",
            "speedup", "utilization"}
    assert d["candidates"] and all(keys <= set(c) for c in d["candidates"])
    assert {c["batch_size"] for c in d["candidates"]} == {256, 512}
    # the band brackets the median
    for c in p.candidates:
        assert c["wall_clock_low"] <= c["wall_clock_to_target"] <= c["wall_clock_high"]


def test_form_a_simulates_every_candidate(tmp_path):
    p = plan("gamma(mean=40ms, cv=0.3)", "10ms", batch_size=1024, problem="logistic", echoes=[4], seeds=2,
             policies="sync,fixed,greedy", target=0.01, processes=1)
    assert [c["policy"] for c in p.candidates] == ["sync", "fixed", "greedy"]
    for c in p.candidates:
        assert math.isfinite(c["wall_clock_to_target"]) and c["steps_to_target"] >= c["batches_to_target"]
        assert 0 < c["utilization"] <= 1
    sync, fixed = by(p, "sync"), by(p, "fixed")
    assert sync["steps_to_target"] == sync["batches_to_target"]
    assert sync["utilization"] == pytest.approx(0.25, rel=0.2)  # t_step / t_load
    assert fixed["steps_to_target"] == 4 * fixed["batches_to_target"]
    # the recommendation is the fastest, up to the 3% preference for fewer steps
    assert p.recommended["wall_clock_to_target"] <= 1.03 * min(c["wall_clock_to_target"] for c in p.candidates)
    out = tmp_path / "plan.png"
    p.plot(out)
    assert out.stat().st_size > 0


def test_unreachable_target_is_bad_input(monkeypatch):
    import echosim.plan.simulated as sim

    monkeypatch.setattr(sim, "_MAX_BUDGET", 80)
    with pytest.raises(ValueError, match="^target: no candidate reaches"):
        plan("40ms", "10ms", batch_size=16, problem="logistic", echoes=[2], seeds=1, policies="sync,fixed",
             target=1e-6, processes=1)


@pytest.mark.parametrize("kw, match", [
    ({"problem": "logistic", "steps_to_target": STEPS}, "^problem: give exactly one"),
    ({}, "^problem: give exactly one"),
    ({"problem": "quadratic"}, "^problem"),
    ({"steps_to_target": {64: 100}}, "^steps_to_target.*two or more"),
    ({"problem": "logistic", "batch_size": 0}, "^batch_size"),
    ({"problem": "logistic", "policies": "sync,lazy"}, "^policies"),
    ({"problem": "logistic", "target": 0}, "^target"),
    ({"problem": "logistic", "accelerator_price": -1}, "^accelerator_price"),
    ({"problem": "logistic", "echoes": [0]}, "^echo"),
    ({"problem": "logistic", "processes": 0}, "^processes"),
    ({"problem": "logistic", "seeds": 0}, "^seeds"),
])
def test_bad_input_names_the_argument(kw, match):
    kw = {"batch_size": 256, **kw}
    with pytest.raises(ValueError, match=match):
        plan("80ms", "10ms", **kw)
