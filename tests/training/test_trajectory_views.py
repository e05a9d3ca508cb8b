"""A trajectory's short views: its repr and its notebook table."""

from echosim.pipeline import Pipeline, simulate
from echosim.training.methods import EchoedGD
from echosim.training.problems import Logistic
from echosim.training.runner import run


def test_a_trajectory_repr_is_short_and_says_status_points_risk_and_clock():
    problem = Logistic(dim=5, design="sphere")
    traj = run(problem, EchoedGD(lr=1.0), batch_size=8, echo=2, n_batches=300, log="all", seed=0, quiet=True)
    text = repr(traj)
    assert len(text) < 200 and text.startswith("Trajectory(status='ok', points=301")
    assert f"final_excess_risk={traj.risk[-1]:.4g}" in text and "wall_clock" not in text
    schedule = simulate(Pipeline(4.0, policy="fixed", echo=2), n_batches=300, seed=0)
    timed = run(problem, EchoedGD(lr=1.0), batch_size=8, echo=schedule, seed=0, quiet=True)
    assert f"wall_clock={timed.time[-1]:.6g}" in repr(timed)
    page = timed._repr_html_()
    assert "<table>" in page and "simulated wall-clock" in page and "time units" in page
