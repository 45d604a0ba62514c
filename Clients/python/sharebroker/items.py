"""Builders for share items (what ``share.send`` and ``share.targets`` take).

An item is one object: ``{"url": ...}``, ``{"text": ...}``, ``{"data": BASE64, "name": ...}`` or
``{"path": "/abs/file"}``, each with an optional ``type`` (a UTI such as ``public.url`` or
``com.adobe.pdf``). The broker infers the type when it is left out.
"""

import base64
import os
from typing import Any, Dict, Optional, Union

Item = Dict[str, Any]


def _typed(item: Item, type: Optional[str]) -> Item:
    if type is not None:
        item["type"] = type
    return item


def url_item(url: str, type: Optional[str] = None) -> Item:
    """A URL item, e.g. ``url_item("https://youtu.be/dQw4w9WgXcQ")`` (type inferred: ``public.url``)."""
    return _typed({"url": str(url)}, type)


def text_item(text: str, type: Optional[str] = None) -> Item:
    """A plain-text item (type inferred: ``public.plain-text``; also ``public.url`` when the text is exactly a URL)."""
    return _typed({"text": str(text)}, type)


def data_item(data: Union[bytes, bytearray, memoryview], name: Optional[str] = None,
              type: Optional[str] = None) -> Item:
    """A file given inline: ``data`` is base64-encoded for the wire.

    ``name`` (e.g. ``"report.pdf"``) is optional; without it the broker names the file from its
    type. The broker infers the type from the name's extension, then from the content.
    """
    item: Item = {"data": base64.b64encode(bytes(data)).decode("ascii")}
    if name is not None:
        item["name"] = name
    return _typed(item, type)


def path_item(path: Union[str, "os.PathLike[str]"], type: Optional[str] = None) -> Item:
    """A file the broker copies from the local file system (made absolute here).

    The broker reads it only when it is a regular file the calling user can read (symlinks
    followed; a broker running as another user takes no path from this caller: use data_item);
    a missing or unreadable file, or a directory, is -32602 naming the path.
    """
    return _typed({"path": os.path.abspath(os.fspath(path))}, type)


def decode_data(item: Item) -> bytes:
    """The bytes of an item that carries inline ``data`` (base64)."""
    return base64.b64decode(item["data"])
