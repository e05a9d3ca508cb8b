"""The user's real training loop: `echoing` around their loader, its `Records`, a short
`pilot`, and the optional signals of what an echoed step is worth (the paired
next-batch progress, a held-out probe loss, the gradient-noise scale;
`echosim.loop.signals`, and `echosim.loop.torch` for a PyTorch model, in the ``torch``
extra). The echo decisions themselves are `echosim.control`'s.
"""

from echosim.loop.echoing import echoing
from echosim.loop.pilot import pilot
from echosim.loop.records import Records, load_records

__all__ = ["echoing", "Records", "load_records", "pilot"]
