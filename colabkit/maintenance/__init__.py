"""Maintainer tools: stamping the Colab badge and set-up cell into the notebooks (notebooks)."""
