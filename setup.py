"""Packaging beyond what pyproject.toml can say: the suite's notebooks and grid files go into the wheel.

`pip install git+https://github.com/OWNER/NAME@REF` (what the Colab set-up cell does) must give a
colabkit that can sweep and report, so the top-level notebooks/ and parameters/ folders (which stay
where they are: the Open-in-Colab badges link to them) are shipped as colabkit/bundled/notebooks/
and colabkit/bundled/parameters/. colabkit.suite finds them there when there is no checkout.
"""

from setuptools import find_packages, setup

BUNDLED = {"colabkit.bundled.notebooks": "notebooks", "colabkit.bundled.parameters": "parameters"}

setup(
    packages=find_packages(include=["colabkit", "colabkit.*"]) + list(BUNDLED),
    package_dir=BUNDLED,
    # source_commit.txt: the commit of a wheel built by `sweep --colab` (colabkit.sweep.remote_colab.sessions.build_wheel)
    package_data={"colabkit.bundled.notebooks": ["*.ipynb"], "colabkit.bundled.parameters": ["*.yaml"],
                  "colabkit": ["source_commit.txt"], "colabkit.cost": ["rates.yaml"]},
)
