"""Collection at the repository root: modules of an optional extra that is not installed are
not imported for their doctests (the torch helpers; tests that use torch skip on their own)."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("torch") else ["echosim/loop/torch.py"]
