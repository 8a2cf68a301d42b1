"""Datasets: download (fetch, verify, cache), the parsers of each archive (har, weather), and the
loaders notebooks call (loaders: MNIST, UCI HAR, weather), with offline stand-ins that say so."""

from colabkit.data.loaders import (
    DATA_SOURCES,
    HarData,
    MnistData,
    WeatherData,
    data_banner,
    load_jena_climate,
    load_mnist,
    load_uci_har,
    load_weather,
)

__all__ = ["DATA_SOURCES", "HarData", "MnistData", "WeatherData", "data_banner", "load_jena_climate", "load_mnist",
           "load_uci_har", "load_weather"]
