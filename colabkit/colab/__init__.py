"""Google Colab: runtime detection (runtime), the repository coordinates (coordinates), the bootstrap
that installs what a runtime lacks (install), and the sweep-in-Colab helpers (sweep).

Every notebook's stamped set-up cell runs `colabkit.bootstrap()` (install.bootstrap).
"""

from colabkit.colab.sweep import unpack_sweep_zips  # what notebooks/report.ipynb imports from here

__all__ = ["unpack_sweep_zips"]
