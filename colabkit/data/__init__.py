"""Datasets: download (fetch, verify, cache), common (data sources, mirrors, provenance), and one
module per dataset with its loader and, where the real data cannot be had, a stand-in that says so.

    mnist = load_mnist(data_source)          # Keras MNIST, 60,000 / 10,000, (28, 28, 1) in [0, 1]
    run.record(..., data=mnist.provenance)
"""

from colabkit.data.common import DATA_SOURCES, data_banner
from colabkit.data.har import HarData, load_uci_har
from colabkit.data.mnist import MnistData, load_mnist
from colabkit.data.weather import WeatherData, load_jena_climate, load_weather

__all__ = ["DATA_SOURCES", "HarData", "MnistData", "WeatherData", "data_banner", "load_jena_climate", "load_mnist",
           "load_uci_har", "load_weather"]
