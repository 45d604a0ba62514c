"""Python client for sharebroker, the local share-and-deep-link broker.

JSON-RPC 2.0 over a Unix domain socket, standard library only::

    from sharebroker import Client, url_item

    with Client(role="extension", bundle_id="com.mycompany.myapp.share") as ext:
        sent = ext.share_send([url_item("https://youtu.be/dQw4w9WgXcQ")], open=True)

    with Client(role="app", bundle_id="com.mycompany.myapp") as app:
        app.app_subscribe()
        event = app.next_event(timeout=5)
        ...

See ``Protocol/PROTOCOL.md`` in the sharebroker repository for the wire protocol.
"""

from .client import Client, Notification, connect, default_socket_path, result_or_error
from .errors import (
    ERROR_NAMES,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_HANDLER,
    NOT_ACCEPTED,
    NOT_FOUND,
    PARSE_ERROR,
    STORAGE_FAILURE,
    UNAUTHORIZED,
    VERSION_CONFLICT,
    TOO_MANY_REQUESTS,
    BrokerConnectionError,
    BrokerError,
    ConnectionClosed,
    ProtocolError,
    SubscriptionEnded,
)
from .framing import CONTENT_LENGTH, NEWLINE
from .items import data_item, decode_data, path_item, text_item, url_item
from .methods import ROLES

__version__ = "0.1.0"

__all__ = [
    "Client", "Notification", "connect", "default_socket_path", "result_or_error",
    "BrokerError", "BrokerConnectionError", "ConnectionClosed", "ProtocolError", "SubscriptionEnded",
    "ERROR_NAMES",
    "PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS", "INTERNAL_ERROR",
    "UNAUTHORIZED", "NOT_FOUND", "NOT_ACCEPTED", "NO_HANDLER", "STORAGE_FAILURE", "VERSION_CONFLICT",
    "TOO_MANY_REQUESTS",
    "NEWLINE", "CONTENT_LENGTH", "ROLES",
    "url_item", "text_item", "data_item", "path_item", "decode_data",
    "__version__",
]
