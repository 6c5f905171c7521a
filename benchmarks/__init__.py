"""Benchmarks: each compares our figure with a bound or a baseline measured in the same run."""
