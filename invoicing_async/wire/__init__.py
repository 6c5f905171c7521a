"""Wire formats: bytes <-> plain Python trees, for Rails-style XML and root-wrapped JSON.

Nothing here knows the models or does I/O: `decode_*` turn a body into
``(root name, value)`` with typed scalars; `encode_*` turn a root name and a tree of
Python values into a request or response body.
"""

from invoicing_async.wire.json import decode_json, encode_json
from invoicing_async.wire.xml import decode_xml, encode_xml

__all__ = ["decode_json", "decode_xml", "encode_json", "encode_xml"]
