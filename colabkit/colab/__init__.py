"""Google Colab: runtime detection (runtime), the repository coordinates (coordinates), the bootstrap
that installs what a runtime lacks (install), and the sweep-in-Colab helpers (sweep).

Every notebook's stamped set-up cell runs `colabkit.bootstrap()` (install.bootstrap).
"""

from colabkit.colab.install import bootstrap
from colabkit.colab.runtime import in_colab
from colabkit.colab.sweep import unpack_sweep_zips

__all__ = ["bootstrap", "in_colab", "unpack_sweep_zips"]
