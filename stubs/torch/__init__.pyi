# Partial stubs: only what treeclass uses (src/treeclass/backends/torch.py,
# src/treeclass/torch.py), so that `mypy --strict src/` checks them without torch installed.
# Checked against torch 2.13.0.
from . import export as export
from . import serialization as serialization
from . import utils as utils
