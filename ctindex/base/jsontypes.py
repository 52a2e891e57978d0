"""The type of a JSON value as `json.loads` returns it.

For a document whose shape is not known, or not yet checked (a record file
another process wrote, a schema, a configuration): the reader narrows each
value it uses with isinstance, so a wrong shape is a clear error of its own
instead of an exception far from the read. Documents of a known shape get a
TypedDict or a class of their own.
"""

from __future__ import annotations

from typing import TypeAlias

JSON: TypeAlias = str | int | float | bool | list["JSON"] | dict[str, "JSON"] | None
JSONObject: TypeAlias = dict[str, JSON]
