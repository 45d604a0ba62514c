#!/usr/bin/env python3
"""Writes the committed seed corpora under fuzz/corpus/<target>/ (realistic inputs: JSON-RPC requests,
Content-Length frames, the seeds' activation predicates and association documents, the contract's manifest,
journal recipes). Run it after changing the input format of a target; it only adds/overwrites seed_* files,
so inputs saved by hand (e.g. minimized crashes kept as regressions) stay."""

import json
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


# --- shared material -------------------------------------------------------------------------------------

REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "broker.status"},
    {"jsonrpc": "2.0", "id": "h", "method": "hello", "params": {"role": "tool"}},
    {"jsonrpc": "2.0", "id": 2, "method": "hello",
     "params": {"role": "extension", "bundleID": "com.mycompany.myapp.share", "token": "optional-secret"}},
    {"jsonrpc": "2.0", "id": 3, "method": "share.send",
     "params": {"items": [{"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ"},
                          {"data": "JVBERi0xLjQK", "name": "x.pdf", "type": "com.adobe.pdf"}],
                "open": True}},
    {"jsonrpc": "2.0", "id": 4, "method": "url.open",
     "params": {"url": "deeplinkmyapp://customer?customerId=42", "fallback": "https://example.com/"}},
    {"jsonrpc": "2.0", "id": 5.0, "method": "defaults.set",
     "params": {"group": "group.com.mycompany.myapp", "key": "k", "value": {"a": [1, 2.5e3, None, True]}}},
    {"jsonrpc": "2.0", "method": "app.ack", "params": {"ids": ["ev-1", "ev-2"]}},
    {"jsonrpc": "2.0", "id": None, "method": "rpc.discover"},
    {"jsonrpc": "2.0", "id": 6, "method": "apps.list", "params": []},
]

MANIFEST = {
    "bundleID": "com.mycompany.myapp",
    "teamID": "ABCDE12345",
    "name": "My App",
    "urlSchemes": ["deeplinkmyapp"],
    "associatedDomains": ["applinks:example.com", "applinks:*.example.org"],
    "appGroups": ["group.com.mycompany.myapp"],
    "token": "optional-secret",
    "launch": ["/usr/local/bin/myapp", "--from-broker"],
    "extensions": [
        {
            "bundleID": "com.mycompany.myapp.share",
            "point": "com.apple.share-services",
            "name": "Send to My App",
            "appGroups": ["group.com.mycompany.myapp"],
            "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1},
        }
    ],
}

PREDICATES = [
    # seed 000 (NSExtensionActivationWebURLPredicate)
    "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0",
    # seed 002 and the contract
    """SUBQUERY (
		extensionItems,
		$extensionItem,
				SUBQUERY (
						$extensionItem.attachments,
						$attachment,
						ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf"
				).@count == $extensionItem.attachments.@count
		).@count >= 1""",
    "TRUEPREDICATE",
    "SUBQUERY(extensionItems, $e, SUBQUERY($e.attachments, $a, ANY $a.registeredTypeIdentifiers UTI-CONFORMS-TO "
    "\"public.image\" OR ANY $a.registeredTypeIdentifiers UTI-EQUALS \"public.url\").@count >= 1).@count == 1",
    "host ENDSWITH[c] 'youtube.com' AND NOT (path BEGINSWITH '/shorts') || query LIKE '*v=*'",
    "absoluteString MATCHES[c] 'https?://(www\\\\.)?youtu(be\\\\.com|\\\\.be)/.*' AND scheme IN {'http', 'https'}",
    "extensionItems[FIRST].attachments[SIZE] BETWEEN {1, 3} AND ALL extensionItems.attachments.@count < 4",
    "(1 + 2) * 3 ** 2 / -4 >= $n - abs(-2) AND lowercase('ABC') ==[cd] 'abc' AND #self.name != nil",
    "extensionItems[0].attachments[1].registeredTypeIdentifiers[$n - 3] ==[c] 'COM.ADOBE.PDF'",
    "NONE $url.registeredTypeIdentifiers ENDSWITH 'pdf' OR SOME {1, 2.5, 0x1F, 0b101, 1e3}.@max > @count",
]

ASSOCIATION_DOCS = [
    # seed 003 (legacy paths)
    {"applinks": {"apps": [], "details": [
        {"appID": "KFCNEC27GU.com.razeware.UniveralLinksTutorial", "paths": ["*"]}]}},
    # iOS 13+ components, defaults, substitution variables (Apple's documented example, adapted)
    {"applinks": {
        "defaults": {"caseSensitive": False},
        "substitutionVariables": {"food": ["burrito", "taco?"]},
        "details": [{
            "appIDs": ["ABCDE12345.com.mycompany.myapp", "ABCDE12345.com.mycompany.other"],
            "components": [
                {"#": "no_universal_links", "exclude": True, "comment": "opt out"},
                {"/": "/buy/*", "?": {"articleNumber": "????"}},
                {"/": "/help/website/*", "exclude": True},
                {"/": "/$(lang)_$(region)/$(food)/*", "percentEncoded": False},
                {"/": "/哈哈/?*", "percentEncoded": False},
                {"?": "id=$(digit)*"},
            ],
            "defaults": {"percentEncoded": True},
        }]},
     "webcredentials": {"apps": ["ABCDE12345.com.mycompany.myapp"]}},
    # legacy NOT exclusions and the iOS 9 dictionary form
    {"applinks": {"apps": [], "details": {
        "ABCDE12345.com.mycompany.myapp": {"paths": ["NOT /private/*", "/videos/*/comments", "/?"]}}}},
]

URLS = [
    "https://example.com/buy/item?articleNumber=1234&x=y#frag",
    "https://example.com/help/website/faq",
    "https://example.com/en_US/taco1/x?id=7",
    "https://example.com/%E5%93%88%E5%93%88/x",
    "https://sub.example.org/videos/1/comments",
    "deeplinkmyapp://customer?customerId=42",
]


# --- targets ---------------------------------------------------------------------------------------------

def framer():
    def hdr(limit, seed):
        return struct.pack("<HH", limit, seed)

    lines = "".join(compact(r) + "\n" for r in REQUESTS[:4])
    write("framer", "newline", hdr(0xFFFF, 1) + lines.encode())
    write("framer", "newline_crlf_blank", hdr(512, 2) + b"\n \r\n" + compact(REQUESTS[0]).encode() + b"\r\n\t\n[]\n")
    body = compact(REQUESTS[1]).encode()
    body2 = compact(REQUESTS[3]).encode()
    cl = b"Content-Length: %d\r\n\r\n" % len(body) + body
    cl += b"content-length:%d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(body2) + body2
    write("framer", "content_length", hdr(0xFFFF, 3) + cl)
    write("framer", "content_length_small_limit", hdr(40, 4) + cl)
    write("framer", "oversize_line", hdr(16, 5) + b"x" * 17 + b"\r\n" + b"y" * 16 + b"\r\n")
    write("framer", "bad_header", hdr(100, 6) + b"Content-Length: 1x\r\n\r\n{}")
    write("framer", "partial", hdr(300, 7) + b"Content-Length: 10\r\nX-A: b\r\n\r\n{\"a\":")
    write("framer", "content_type_first", hdr(0xFFFF, 8) + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    write("framer", "header_like_line", hdr(512, 9) + b"Content-Typo\n" + compact(REQUESTS[0]).encode() + b"\n")


def json_target():
    for i, r in enumerate(REQUESTS):
        write("json", "request%d" % i, compact(r))
    write("json", "manifest", json.dumps(MANIFEST, indent=2))
    write("json", "association", json.dumps(ASSOCIATION_DOCS[1], indent=1, ensure_ascii=False))
    write("json", "numbers", "[0,-0,1.5e-7,-2E+300,123456789012345678901234567890,0.1,1e400,-9007199254740993]")
    write("json", "strings", '["\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/\\b\\f\\r","\u00e9\U0001F600",""," \\u0000 "]')
    write("json", "nested", "[" * 40 + "{}" + "]" * 40)
    write("json", "duplicate_keys", '{"a":1,"b":2,"a":{"c":[true,false,null]}}')


def rpc():
    for i, r in enumerate(REQUESTS):
        write("rpc", "request%d" % i, compact(r))
    write("rpc", "batch", compact(REQUESTS[:3] + [1, {"jsonrpc": "2.0", "method": 1}]))
    write("rpc", "notifications_batch", compact([REQUESTS[6], REQUESTS[6]]))
    write("rpc", "empty_batch", "[]")
    write("rpc", "parse_error", '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    write("rpc", "invalid", '{"jsonrpc":"2.0","id":{"x":1},"method":"m","params":"bar"}')
    write("rpc", "response", '{"jsonrpc":"2.0","id":7,"error":{"code":-32003,"message":"Not accepted","data":'
                             '{"candidates":[{"extension":"a","app":"b","name":"c"}]}}}')


def url():
    for i, u in enumerate(URLS + [
        "https://user:pw@[::1]:8080/a/b;c?d=e&f#g",
        "file:///tmp/x.txt",
        "mailto:someone@example.com",
        "HTTPS://Example.COM:443/%7Euser/",
        "applinks:*.example.com?mode=developer",
        "Check this out: https://youtu.be/abc?t=1). And (https://example.com/a_(b)) too.",
        "  https://www.youtube.com/watch?v=dQw4w9WgXcQ  ",
    ]):
        write("url", "url%d" % i, u)


def predicate():
    for i, p in enumerate(PREDICATES):
        write("predicate", "p%d" % i, p)
    write("predicate", "with_self", "name BEGINSWITH[cd] 'caf' AND tags[LAST] == 'b' AND items.@sum.k == 3\0"
          + compact({"name": "Café", "tags": ["a", "b"], "items": [{"k": 1}, {"k": 2}]}) + "\0"
          + compact({"n": 2}))
    write("predicate", "subquery_vars", "SUBQUERY(SELF, $x, $x > $n).@count == 2\0[1,2,3,4]\0{\"n\":2}")


def activation():
    write("activation", "contract_dict", compact(MANIFEST["extensions"][0]["activationRule"]))
    write("activation", "seed000_dict", compact({
        "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
        "NSExtensionActivationWebURLPredicate": PREDICATES[0]}))
    write("activation", "seed002_predicate", PREDICATES[1])
    write("activation", "seed002_true", compact("TRUEPREDICATE"))
    write("activation", "v2_fuzzy", compact({
        "NSExtensionActivationDictionaryVersion": 2,
        "NSExtensionActivationSupportsImageWithMaxCount": 3,
        "NSExtensionActivationSupportsFileWithMaxCount": "2",
        "NSExtensionActivationSupportsText": True,
        "NSExtensionActivationSupportsMovieWithMaxCount": 0,
        "NSExtensionActivationSupportsAttachmentsWithMinCount": 1,
        "NSExtensionActivationSupportsWebPageWithMaxCount": 1,
        "NSExtensionActivationUsesStrictMatching": "NO",
        "NSExtensionActivationSupportsWebURLWithMaxCont": 1}))
    items = [{"url": "https://www.youtube.com/watch?v=1"}, {"text": "https://youtu.be/x"},
             {"data": "iVBORw0KGgo=", "name": "a.png"}, {"path": "/tmp/a.pdf", "type": "com.adobe.pdf"},
             {"data": "JVBERi0xLjQK"}, {"url": "file:///tmp/x.mov"}]
    write("activation", "dict_with_items", compact({"NSExtensionActivationSupportsWebURLWithMaxCount": 2,
                                                     "NSExtensionActivationSupportsFileWithMaxCount": 1})
          + "\0" + compact(items))
    write("activation", "predicate_with_items", compact(PREDICATES[3]) + "\0" + compact(items))


def association():
    urls = "\n".join(URLS)
    for i, d in enumerate(ASSOCIATION_DOCS):
        write("association", "doc%d" % i, json.dumps(d, ensure_ascii=False))
        write("association", "doc%d_urls" % i, json.dumps(d, ensure_ascii=False) + "\0" + urls
              + "\0ABCDE12345.com.mycompany.myapp\nKFCNEC27GU.com.razeware.UniveralLinksTutorial")
    write("association", "bad_key", '{"applinks":{"details":[{"appIDs":["x"],"components":[{"/":1}]}]}}')
    write("association", "no_applinks", '{"webcredentials":{"apps":["ABCDE12345.com.a"]}}')


def manifest():
    write("manifest", "contract", json.dumps(MANIFEST, indent=2))
    second = dict(MANIFEST, bundleID="com.mycompany.other", urlSchemes=["deeplinkmyapp", "https"],
                  associatedDomains=["applinks:example.com:8443?mode=developer"], token=None,
                  uids=[0, 1000], executable="/usr/bin/other")
    second["extensions"] = [dict(MANIFEST["extensions"][0], bundleID="com.mycompany.other.action",
                                 point="com.apple.ui-services", activationRule=PREDICATES[1])]
    del second["token"]
    write("manifest", "two_apps", json.dumps(MANIFEST) + "\0" + json.dumps(second))
    write("manifest", "issues", compact({"bundleID": "bad id", "teamID": "AB-1", "urlSchemes": ["1x", ""],
                                         "associatedDomains": ["applinks:*.*.x", "foo:bar"], "launch": [],
                                         "extensions": [{"bundleID": "a", "activationRule": 3}, 7],
                                         "uids": [-1, 4294967296], "executable": "rel"}))


def journal():
    ev = lambda seq, app="com.mycompany.myapp": compact(
        {"app": app, "id": "ev-%d" % seq, "seq": seq,
         "body": {"id": "ev-%d" % seq, "kind": "openURL", "url": "deeplinkmyapp://x?%d" % seq}})
    events = ["1" + ev(1), "1" + ev(2), "1" + ev(3, "com.b"), "2" + compact({"app": "com.mycompany.myapp", "ids": ["ev-1"]}),
              "3" + compact({"next": 10}), "1" + ev(10)]
    write("journal", "events", "E\n" + "\n".join(events) + "\n")
    write("journal", "events_torn", "ET\n" + "\n".join(events) + "\n")
    write("journal", "events_corrupt_split_small", "EC2L\n" + "\n".join(events) + "\n")
    write("journal", "events_garbage_zeros", "EGZ\n" + "\n".join(events) + "\n")
    defaults = ["1" + compact({"key": "theme", "value": "dark", "version": 1}),
                "1" + compact({"key": "list", "value": [1, {"a": None}], "version": 2}),
                "2" + compact({"key": "theme", "version": 3}),
                "3" + compact({"version": 4, "values": {"x": 1, "y": "z"}}),
                "1" + compact({"key": "after", "value": True, "version": 5})]
    write("journal", "defaults", "D\n" + "\n".join(defaults) + "\n")
    write("journal", "defaults_small_torn", "DLT\n" + "\n".join(defaults) + "\n")
    share = lambda i: compact({"id": "sh-%d" % i, "extension": "com.mycompany.myapp.share", "app": "com.mycompany.myapp",
                               "group": "group.com.mycompany.myapp", "created": "2025-06-01T12:00:0%dZ" % i,
                               "items": [{"url": "https://youtu.be/x"}, {"file": "x.pdf", "name": "x.pdf",
                                                                          "type": "com.adobe.pdf", "size": 10}]})
    shares = ["1" + share(1), "1" + share(2), "2" + compact({"id": "sh-1"}), "1" + share(3)]
    write("journal", "shares", "S\n" + "\n".join(shares) + "\n")
    write("journal", "shares_corrupt", "SC2\n" + "\n".join(shares) + "\n")
    # Carried copies (type 3, with `n`: the original's place, segment << 40 | offset): of a live share
    # (its original at offset 0 of segment 1) and of an id not seen (placed before sh-4), tiny segments
    # (the commit compacts).
    numbered = lambda i, n: share(i)[:-1] + ',"n":%d}' % n
    carried = ["1" + share(1), "1" + share(2), "1" + share(4), "2" + compact({"id": "sh-2"}),
               "3" + numbered(1, 1 << 40), "3" + numbered(3, (1 << 40) + 1), "1" + share(5)]
    write("journal", "shares_carried_small", "S2L\n" + "\n".join(carried) + "\n")
    write("journal", "raw_segment", b"ER\n" + b"\xa5S\x01\x00\x02\x00\x00\x00\x00\x00\x00\x00{}" + b"\x00" * 8)
    write("journal", "named_segment", "E#000007\n" + "\n".join(events[:2]) + "\n")


for f in (framer, json_target, rpc, url, predicate, activation, association, manifest, journal):
    f()
