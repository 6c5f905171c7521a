"""The package version, read by hatchling and sent in the User-Agent."""

__version__ = "0.1.0"
