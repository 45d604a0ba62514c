"""One Python method per broker method, shared by the sync and the asyncio client.

Every method here only builds the params and returns ``self.call(method, params)``: with
:class:`~sharebroker.Client` that is the result (a ``dict``), with
:class:`~sharebroker.aio.AsyncClient` an awaitable of it. Errors are raised as
:class:`~sharebroker.BrokerError`.
"""

from typing import Any, Dict, Iterable, List, Optional, Union

Item = Dict[str, Any]

#: Roles a session can take with ``hello``.
ROLES = ("app", "extension", "tool")


def _items(items: Union[Item, Iterable[Item]]) -> List[Item]:
    if isinstance(items, dict):
        return [items]
    return list(items)


class BrokerMethods:
    """Mixin: the contract's methods. Subclasses provide ``call(method, params)``."""

    def call(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:  # pragma: no cover
        raise NotImplementedError

    # -- session -------------------------------------------------------------------------------

    def hello(self, role: str, bundle_id: Optional[str] = None, token: Optional[str] = None):
        """Start the session: ``role`` is ``"app"``, ``"extension"`` or ``"tool"``.

        ``app`` and ``extension`` must name a registered ``bundle_id`` (-32602 when missing,
        -32001 when unknown) and give its ``token`` when the manifest sets one (-32001 when
        wrong). Returns ``{protocol, broker: {name, version}, session, role, bundleID?}``.
        """
        params: Dict[str, Any] = {"role": role}
        if bundle_id is not None:
            params["bundleID"] = bundle_id
        if token is not None:
            params["token"] = token
        return self.call("hello", params)

    def rpc_discover(self):
        """The broker's OpenRPC document (allowed before ``hello``)."""
        return self.call("rpc.discover", {})

    def broker_status(self):
        """``{version, protocol, connections, apps, subscribers, pendingEvents, pendingShares,
        uptimeSeconds, ...}`` (allowed before ``hello``)."""
        return self.call("broker.status", {})

    # -- apps ----------------------------------------------------------------------------------

    def apps_list(self):
        """``{apps, errors, warnings, conflicts}``: the registered apps (tokens never shown)."""
        return self.call("apps.list", {})

    def apps_reload(self):
        """Re-read ``STATE/apps/*.json`` (as SIGHUP does); returns what :meth:`apps_list` does."""
        return self.call("apps.reload", {})

    # -- URLs ----------------------------------------------------------------------------------

    def url_open(self, url: str, fallback: Optional[str] = None):
        """Open a URL: a durable event is queued for the app that handles it.

        Returns ``{app, via, eventID, delivered, queued, kind}``; ``via`` is ``"scheme"``,
        ``"universalLink"``, ``"browser"`` or ``"fallback"``. -32004 when nothing opens it and no
        ``fallback`` was given; -32602 for an invalid URL.
        """
        params: Dict[str, Any] = {"url": url}
        if fallback is not None:
            params["fallback"] = fallback
        return self.call("url.open", params)

    def url_can_open(self, url: str, fallback: Optional[str] = None):
        """``{canOpen, app?, via?}``: the routing decision without queuing anything; with
        ``fallback``, whether ``url_open`` would open the URL or its fallback (``via: "fallback"``)."""
        params: Dict[str, Any] = {"url": url}
        if fallback is not None:
            params["fallback"] = fallback
        return self.call("url.canOpen", params)

    def url_explain(self, url: str, fallback: Optional[str] = None):
        """``{url, fallback?, steps, decision, text}``: the routing decision, step by step."""
        params: Dict[str, Any] = {"url": url}
        if fallback is not None:
            params["fallback"] = fallback
        return self.call("url.explain", params)

    # -- events (role app) ---------------------------------------------------------------------

    def app_subscribe(self):
        """Subscribe as the app (role ``app``): returns ``{pending}``; then ``app.event``
        notifications arrive (pending ones first, oldest first). Read them with
        ``next_notification``/``events``/``next_event``. A new subscription (from any connection
        of the app) takes over: the old connection is sent ``app.subscriptionEnded {app, reason}``
        (this client asks for it: ``takeoverNotice: true``)
        (its waits for an ``app.event`` then raise :class:`~sharebroker.SubscriptionEnded`, its
        event iterators end). A successful subscribe drops the ``app.subscriptionEnded``
        notifications still queued from before it (they ended the subscription it replaces)."""
        return self.call("app.subscribe", {"takeoverNotice": True})

    def app_unsubscribe(self):
        """Stop receiving the app's events on this connection, which stays open (role ``app``):
        returns ``{unsubscribed}``, false when this connection was not the app's subscriber
        (never subscribed, already unsubscribed, or taken over). The app's events, unacked ones
        included, wait for its next subscriber (``url.open`` answers ``delivered: False, queued:
        True``; an app with a ``launch`` command is launched for them). Events the broker wrote
        before it read the request may still arrive (they stay queued here); unacked, they come
        again to the next subscriber."""
        return self.call("app.unsubscribe", {})

    def app_ack(self, ids: Union[str, Iterable[str]]):
        """Acknowledge events by id (one id or several): ``{acked: N}``, durable before the
        answer. Ids the caller does not hold count 0; never an error."""
        if isinstance(ids, str):
            ids = [ids]
        return self.call("app.ack", {"ids": list(ids)})

    # -- shares --------------------------------------------------------------------------------

    def share_targets(self, items: Union[Item, Iterable[Item]]):
        """``{targets: [{extension, app, name}]}``: extensions whose activation rule accepts the
        items as a whole. Build items with :func:`url_item`, :func:`text_item`,
        :func:`data_item`, :func:`path_item`."""
        return self.call("share.targets", {"items": _items(items)})

    def share_send(self, items: Union[Item, Iterable[Item]], extension: Optional[str] = None,
                   group: Optional[str] = None, open: Union[bool, str, None] = None):
        """Share items (role ``extension`` as itself, or ``tool`` as the share sheet).

        ``extension``: the target (a tool must name one when several accept: otherwise -32003
        with ``data["candidates"]``; naming one no manifest declares is -32002). ``group``: one of the extension's app groups (default: its
        first). ``open=True`` also opens ``SCHEME://open-from-share?share=SHAREID`` on the
        containing app; ``open="URL"`` opens that URL instead. Durable before the answer.
        Returns ``{shareID, extension, app, group, eventID?}``.
        """
        params: Dict[str, Any] = {"items": _items(items)}
        if extension is not None:
            params["extension"] = extension
        if group is not None:
            params["group"] = group
        if open is not None and open is not False:
            params["open"] = open
        return self.call("share.send", params)

    def share_list(self, group: Optional[str] = None):
        """``{shares: [{shareID, extension, app, group, created, items}]}``: pending shares of the
        caller's groups (or of ``group``), oldest first."""
        params: Dict[str, Any] = {}
        if group is not None:
            params["group"] = group
        return self.call("share.list", params)

    def share_get(self, share_id: str):
        """One share; file items carry the absolute ``path`` of the copy in the group directory
        (plus ``name``, ``type``, ``size``). -32002 for an unknown id."""
        return self.call("share.get", {"shareID": share_id})

    def share_read(self, share_id: str, item: int, offset: int = 0, length: Optional[int] = None):
        """Bytes of a file item of a share, for an app that cannot open its ``path`` (a broker
        of another user keeps its group directory to itself): ``{data, offset, size, eof}``,
        ``data`` base64 (``base64.b64decode``), at most ``length`` bytes (the broker's default
        1 MiB when None; at most 4 MiB) from ``offset``. Read on until ``eof``."""
        params: Dict[str, Any] = {"shareID": share_id, "item": item, "offset": offset}
        if length is not None:
            params["length"] = length
        return self.call("share.read", params)

    def share_complete(self, share_id: str):
        """Delete the share's record and files: ``{completed: true}``. -32002 for an unknown id."""
        return self.call("share.complete", {"shareID": share_id})

    # -- group defaults (UserDefaults(suiteName:)) ---------------------------------------------

    def defaults_get(self, group: str, key: str):
        """``{exists, value, version?}``; an absent key gives ``exists: False, value: None``."""
        return self.call("defaults.get", {"group": group, "key": key})

    def defaults_set(self, group: str, key: str, value: Any, if_version: Optional[int] = None):
        """Set a key to any JSON value (``None`` included): ``{version}``. With ``if_version``
        it is a compare-and-set (-32006 ``VERSION_CONFLICT`` with ``data["version"]``)."""
        params: Dict[str, Any] = {"group": group, "key": key, "value": value}
        if if_version is not None:
            params["ifVersion"] = if_version
        return self.call("defaults.set", params)

    def defaults_remove(self, group: str, key: str, if_version: Optional[int] = None):
        """Remove a key: ``{removed, version}`` (``removed`` False: there was no such key)."""
        params: Dict[str, Any] = {"group": group, "key": key}
        if if_version is not None:
            params["ifVersion"] = if_version
        return self.call("defaults.remove", params)

    def defaults_list(self, group: str):
        """``{values: {key: value}, version}``: the group's whole suite."""
        return self.call("defaults.list", {"group": group})

    def defaults_watch(self, group: str, keys: Optional[Iterable[str]] = None):
        """Watch a group (optionally some keys): ``{watching: true, ...}``; then
        ``defaults.changed {group, key, value?, removed?, version}`` notifications arrive, until
        ``defaults.watchEnded {group, reason}`` says a manifest reload took the group away."""
        params: Dict[str, Any] = {"group": group}
        if keys is not None:
            params["keys"] = [keys] if isinstance(keys, str) else list(keys)
        return self.call("defaults.watch", params)
