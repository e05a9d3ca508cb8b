"""load_records and Records: every field checked, one ValueError naming the file and the
field, and `plan --records` turning it into one line with exit 2."""

import json

import numpy as np
import pytest

from echosim.cli import main
from echosim.loop import Records, echoing, load_records


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    it = echoing(np.zeros((6, 4, 2)), 2)
    for _ in it:
        it.report(1.0)
    path = tmp_path_factory.mktemp("rec") / "ok.npz"
    it.records().save(path)
    return path


def _rewrite(src, dst, meta=None, **arrays):
    with np.load(src) as z:
        d = {k: z[k] for k in z.files}
    m = json.loads(str(d["meta"]))
    for k, v in (meta or {}).items():
        if v is KeyError:
            del m[k]
        else:
            m[k] = v
    d["meta"] = np.array(json.dumps(m))
    for k, v in arrays.items():
        if v is KeyError:
            del d[k]
        else:
            d[k] = v
    np.savez(dst, **d)
    return dst


def _damage(saved, tmp_path, kind):
    p = tmp_path / f"{kind}.npz"
    raw = saved.read_bytes()
    with np.load(saved) as z:
        lt, loss = z["load_time"], z["loss"]
    if kind == "truncated":
        p.write_bytes(raw[: len(raw) // 2])
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "npy":
        p = tmp_path / "a.npy"
        np.save(p, np.arange(3))
    elif kind == "text":
        p.write_text("time\n0.1\n")
    elif kind == "directory":
        p.mkdir()
    elif kind == "no policy":
        _rewrite(saved, p, meta={"policy": KeyError})
    elif kind == "policy 123":
        _rewrite(saved, p, meta={"policy": 123})
    elif kind == "batch size -64":
        _rewrite(saved, p, meta={"batch_size": -64})
    elif kind == "echo string":
        _rewrite(saved, p, meta={"echo": "2"})
    elif kind == "format":
        _rewrite(saved, p, meta={"format": "other"})
    elif kind == "negative load":
        _rewrite(saved, p, load_time=-1 - lt)
    elif kind == "infinite load":
        _rewrite(saved, p, load_time=lt + np.inf)
    elif kind == "string load":
        _rewrite(saved, p, load_time=np.array(["1"] * lt.size))
    elif kind == "short loss":
        _rewrite(saved, p, loss=loss[:3])
    elif kind == "2-d loss":
        _rewrite(saved, p, loss=loss.reshape(2, -1))
    elif kind == "no step_time":
        _rewrite(saved, p, step_time=KeyError)
    elif kind == "negative steps":
        _rewrite(saved, p, steps_per_batch=-np.ones(lt.size, dtype=np.int64))
    elif kind == "meta array":
        with np.load(saved) as z:
            d = {k: z[k] for k in z.files}
        d["meta"] = np.arange(3)
        np.savez(p, **d)
    return p


CASES = {"truncated": "not an echosim records file", "empty": "not an echosim records file",
         "npy": "single NumPy array", "text": "not an echosim records file", "directory": "directory",
         "no policy": "policy", "policy 123": "policy", "batch size -64": "batch_size", "echo string": "echo",
         "format": "format", "negative load": "load_time", "infinite load": "load_time",
         "string load": "load_time", "short loss": "loss", "2-d loss": "loss", "no step_time": "step_time",
         "negative steps": "steps_per_batch", "meta array": "meta"}


@pytest.mark.parametrize("kind", CASES)
def test_a_damaged_file_is_one_value_error_naming_the_file_and_the_field(saved, tmp_path, kind):
    p = _damage(saved, tmp_path, kind)
    with pytest.raises(ValueError, match="^records: ") as e:
        load_records(p)
    assert str(p) in str(e.value) and CASES[kind] in str(e.value)


@pytest.mark.parametrize("kind", ["truncated", "npy", "policy 123", "negative load", "short loss"])
def test_plan_records_with_a_damaged_file_is_one_line_and_exit_2(saved, tmp_path, kind, capsys):
    p = _damage(saved, tmp_path, kind)
    assert main(["plan", "--records", str(p), "--batch-size", "4"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and len(err.err.strip().splitlines()) == 1 and str(p) in err.err


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_records(tmp_path / "nope.npz")


def test_the_good_file_loads(saved):
    r = load_records(saved)
    assert r.policy == "fixed" and r.echo == 2 and r.batch_size == 4 and r.n_steps == 12


@pytest.mark.parametrize("kw, match", [
    ({"policy": "lazy"}, "^records: policy"),
    ({"policy": "fixed", "echo": None}, "^records: echo"),
    ({"policy": "greedy", "echo": 2}, "^records: echo"),
    ({"batch_size": 0}, "^records: batch_size"),
    ({"wait_time": np.array([np.nan, 0.0])}, "^records: wait_time"),
    ({"cap": np.array([0, 1])}, "^records: cap"),
    ({"epoch": np.array([1, 0])}, "^records: epoch"),
    ({"step_batch": np.array([1, 0])}, "^records: step_batch"),
    ({"step_time": np.array([-1.0, 0.0])}, "^records: step_time"),
    ({"load_censored": np.array([1.0, 0.0])}, "^records: load_censored"),
])
def test_records_built_in_python_are_checked(kw, match):
    fields = dict(policy="sync", echo=1, batch_size=None, load_time=np.zeros(2), load_censored=np.zeros(2, bool),
                  wait_time=np.zeros(2), steps_per_batch=np.ones(2, np.int64), cap=np.ones(2, np.int64),
                  epoch=np.zeros(2, np.int64), step_batch=np.arange(2), step_start=np.zeros(2),
                  step_time=np.zeros(2), loss=np.zeros(2))
    Records(**fields)  # valid
    fields.update(kw)
    with pytest.raises(ValueError, match=match):
        Records(**fields)


def test_save_removes_the_temp_files_of_killed_writers_to_the_same_path(saved, tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".r.npz.{dead}.0123456789abcdef.tmp"
    stale.write_bytes(b"half a file")
    other = tmp_path / f".other.npz.{dead}.0123456789abcdef.tmp"
    other.write_bytes(b"not ours")
    load_records(saved).save(tmp_path / "r.npz")
    assert not stale.exists() and other.exists()
