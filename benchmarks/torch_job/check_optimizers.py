"""echosim's echoed heavy ball, Adam and AdamW kernels against torch.optim.SGD(momentum),
torch.optim.Adam and torch.optim.AdamW on the same batches and the same echo schedule (needs torch: the
benchmark-only extra; not part of the test suite, which checks the kernels against
NumPy twins).

    python benchmarks/torch_job/check_optimizers.py [--json PATH]
    python benchmarks/torch_job/check_optimizers.py --smoke      # heavy ball, least squares, 5 fresh batches

Every batch end of echosim's kernel (float64) is compared with a plain torch loop:
per fresh batch t, K_t steps of ``loss = mean per-example loss + l2/2 ||w||^2``,
``loss.backward()``, ``opt.step()``. Prints the largest absolute difference per case.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import harness

from echosim.training.methods import EchoedAdam, EchoedAdamW, EchoedHeavyBall
from tests.training.test_kernel import kernel_run

CASES = {  # echosim's spec (lr unused: the lr of the case) → torch's optimizer with the same hyper-parameters
    "heavy_ball": (EchoedHeavyBall(0.0, momentum=0.9), 0.05,
                   lambda torch, w, lr: torch.optim.SGD([w], lr=lr, momentum=0.9, dampening=0.0)),
    "adam": (EchoedAdam(0.0, betas=(0.9, 0.999), eps=1e-8), 0.02,
             lambda torch, w, lr: torch.optim.Adam([w], lr=lr, betas=(0.9, 0.999), eps=1e-8)),
    "adamw": (EchoedAdamW(0.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1), 0.02,
              lambda torch, w, lr: torch.optim.AdamW([w], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
}


def torch_run(X, Y, K, lr, make_optimizer, loss, l2):
    import torch

    w = torch.zeros(X.shape[2], dtype=torch.float64, requires_grad=True)
    opt = make_optimizer(torch, w, lr)
    ends = []
    for t in range(X.shape[0]):
        x, y = torch.from_numpy(X[t]), torch.from_numpy(Y[t])
        for _ in range(K[t]):
            opt.zero_grad()
            z = x @ w
            per = 0.5 * (z - y) ** 2 if loss == "squared" else torch.nn.functional.softplus(-y * z)
            (per.mean() + 0.5 * l2 * (w @ w)).backward()
            opt.step()
        ends.append(w.detach().numpy().copy())
    return np.array(ends)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_options(ap, smoke="heavy ball on least squares only, 5 fresh batches")
    args = ap.parse_args(argv)
    with harness.Session("torch_job/check_optimizers", args, argv) as session:
        worst, rows = compare(5, ["heavy_ball"], ["squared"], [0.0]) if args.smoke else compare(30)
        session.results = {"largest_difference": worst, "rows": rows}
    return 0 if worst < 1e-10 else 1


def compare(T: int, methods=tuple(CASES), losses=("squared", "logistic"), l2s=(0.0, 1e-3)) -> tuple[float, list]:
    """Every case (method, loss, l2) on T fresh batches; prints the table; (largest difference, rows)."""
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    B, d = 32, 10
    K = rng.integers(1, 9, size=T)
    print(f"torch {torch.__version__}; T = {T} fresh batches of B = {B}, d = {d}, K_t in 1..8 "
          f"({int(K.sum())} steps), float64\n")
    print("| method | loss | lr | l2 | max abs difference of the batch-end iterates | max abs iterate |")
    print("|---|---|---:|---:|---:|---:|")
    worst, rows = 0.0, []
    for method, loss, l2 in itertools.product(methods, losses, l2s):
        spec, lr, make_optimizer = CASES[method]
        X = rng.standard_normal((T, B, d)) / np.sqrt(np.arange(1, d + 1))
        w_star = rng.standard_normal(d)
        Y = X @ w_star + 0.5 * rng.standard_normal((T, B)) if loss == "squared" else np.where(
            rng.random((T, B)) < 1 / (1 + np.exp(-(X @ w_star))), 1.0, -1.0)
        _, (last, _, _), _ = kernel_run(X, Y, K, np.full(T, lr), spec, loss=loss, l2=l2)
        ref = torch_run(X, Y, K, lr, make_optimizer, loss, l2)
        diff = float(np.abs(last - ref).max())
        worst = max(worst, diff)
        rows.append({"method": method, "loss": loss, "lr": lr, "l2": l2, "max_abs_difference": diff})
        print(f"| {method} | {loss} | {lr:g} | {l2:g} | {diff:.2e} | {float(np.abs(ref).max()):.3g} |")
    print(f"\nlargest difference {worst:.2e}")
    return worst, rows


if __name__ == "__main__":
    sys.exit(main())
