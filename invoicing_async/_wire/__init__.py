"""Wire formats: bytes <-> plain Python trees, for Rails-style XML and root-wrapped JSON.

Nothing here knows the models or does I/O.
"""
