"""colabkit's version, in a module of its own so that any module can read it without importing the
package root (which imports the data loaders, the device set-up and the records)."""

__version__ = "0.1.0"
