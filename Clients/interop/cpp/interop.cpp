// Interop: libjson-rpc-cpp 0.7 (Debian's libjsonrpccpp-dev), jsonrpc::Client over
// jsonrpc::UnixDomainSocketClient, against a real sharebroker.
//
// UnixDomainSocketClient opens a NEW connection for every message: it writes the request (jsoncpp's
// FastWriter ends it with "\n": newline framing), reads until the first "\n" and closes. So a
// session (hello) lasts one call; what needs a session goes in one batch (Client::CallProcedures),
// whose members the broker runs in order on that connection: [hello, then the calls].
// Error responses arrive as jsonrpc::JsonRpcException (GetCode, GetMessage, GetData) for single
// calls and through BatchResponse (getErrorCode, getErrorMessage) for batch members.
//
// The socket is $SHAREBROKER_SOCKET (run through `fixture.py run --`); one broker for the whole
// program, so the checks below are written in order against its state.
//
// Client::CallNotification is not used: this connector waits for a reply line to every message,
// so a notification (which must not be answered) would block it forever.

#include <jsonrpccpp/client.h>
#include <jsonrpccpp/client/connectors/unixdomainsocketclient.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

using jsonrpc::BatchCall;
using jsonrpc::BatchResponse;
using jsonrpc::Client;
using jsonrpc::JsonRpcException;
using jsonrpc::UnixDomainSocketClient;

static int passed = 0, failed = 0;

struct CheckFailed {
    std::string what;
};

static void check(bool cond, const std::string &what) {
    if (!cond) throw CheckFailed{what};
}

static std::string show(const Json::Value &v) {
    Json::FastWriter w;
    std::string s = w.write(v);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

static void run(const char *name, const std::function<void()> &fn) {
    try {
        fn();
        ++passed;
        std::cout << "ok   libjsonrpccpp." << name << std::endl;
    } catch (const CheckFailed &e) {
        ++failed;
        std::cout << "FAIL libjsonrpccpp." << name << ": " << e.what << std::endl;
    } catch (const JsonRpcException &e) {
        ++failed;
        std::cout << "FAIL libjsonrpccpp." << name << ": unexpected JsonRpcException " << e.GetCode() << " "
                  << e.GetMessage() << std::endl;
    } catch (const std::exception &e) {
        ++failed;
        std::cout << "FAIL libjsonrpccpp." << name << ": " << e.what() << std::endl;
    }
}

static std::string socketPath;

// A call that must fail with `code`, as the library's JsonRpcException.
static JsonRpcException expectError(int code, const std::string &method, const Json::Value &params) {
    UnixDomainSocketClient connector(socketPath);
    Client client(connector);
    try {
        Json::Value result = client.CallMethod(method, params);
        throw CheckFailed{method + ": expected error " + std::to_string(code) + ", got " + show(result)};
    } catch (const JsonRpcException &e) {
        check(e.GetCode() == code, method + ": expected code " + std::to_string(code) + ", got " +
                                       std::to_string(e.GetCode()) + " (" + e.GetMessage() + ")");
        check(!e.GetMessage().empty(), method + ": empty error message");
        return e;
    }
}

static Json::Value hello(const std::string &role, const std::string &bundle = "", const std::string &token = "") {
    Json::Value p(Json::objectValue);
    p["role"] = role;
    if (!bundle.empty()) p["bundleID"] = bundle;
    if (!token.empty()) p["token"] = token;
    return p;
}

static Json::Value obj1(const std::string &k, const Json::Value &v) {
    Json::Value o(Json::objectValue);
    o[k] = v;
    return o;
}

// One batch on one connection; returns the response.
static BatchResponse batch(const BatchCall &calls) {
    UnixDomainSocketClient connector(socketPath);
    Client client(connector);
    return client.CallProcedures(calls);
}

int main() {
    const char *env = std::getenv("SHAREBROKER_SOCKET");
    if (env == nullptr || *env == '\0') {
        std::cerr << "SHAREBROKER_SOCKET is not set (run through fixture.py run --)" << std::endl;
        return 2;
    }
    socketPath = env;

    run("broker_status", [] {
        UnixDomainSocketClient connector(socketPath);
        Client client(connector);
        Json::Value st = client.CallMethod("broker.status", Json::Value(Json::objectValue));
        check(st["version"].isString() && !st["version"].asString().empty(), "version: " + show(st));
        check(st["apps"].asInt() == 2, "apps: " + show(st["apps"]));
        check(st["connections"].asInt() >= 1, "connections");
        // With no params at all (the library leaves "params" out for a null value).
        Json::Value st2 = client.CallMethod("broker.status", Json::Value());
        check(st2.isMember("pendingEvents"), "broker.status without params: " + show(st2));
    });

    run("rpc_discover", [] {
        UnixDomainSocketClient connector(socketPath);
        Client client(connector);
        Json::Value doc = client.CallMethod("rpc.discover", Json::Value(Json::objectValue));
        std::set<std::string> names;
        for (const auto &m : doc["methods"]) names.insert(m["name"].asString());
        for (const char *m : {"hello", "share.targets", "share.send", "share.list", "share.get", "share.complete",
                              "url.open", "url.canOpen", "app.subscribe", "app.ack", "defaults.get", "defaults.set",
                              "defaults.remove", "defaults.list", "defaults.watch", "apps.list", "apps.reload",
                              "broker.status", "rpc.discover"})
            check(names.count(m) == 1, std::string("rpc.discover lacks ") + m);
    });

    run("errors", [] {
        // Each call is a fresh connection: no hello.
        expectError(-32001, "url.canOpen", obj1("url", "interop-alpha://x"));
        JsonRpcException e = expectError(-32601, "no.such.method", Json::Value(Json::objectValue));
        check(e.GetMessage().find("no.such.method") != std::string::npos, "-32601 message: " + e.GetMessage());
        expectError(-32001, "hello", hello("app", "org.interop.alpha", "wrong"));
        expectError(-32602, "hello", hello("app"));
        JsonRpcException r = expectError(-32001, "hello", hello("extension", "org.interop.alpha", "alpha-secret"));
        check(r.GetData()["role"].asString() == "app", "-32001 data for the wrong role: " + show(r.GetData()));
    });

    run("hello_roles", [] {
        UnixDomainSocketClient connector(socketPath);
        Client client(connector);
        Json::Value t = client.CallMethod("hello", hello("tool"));
        check(t["protocol"].asInt() == 1 && t["role"].asString() == "tool" && t["session"].isIntegral(),
              "hello tool: " + show(t));
        Json::Value a = client.CallMethod("hello", hello("app", "org.interop.alpha", "alpha-secret"));
        check(a["role"].asString() == "app" && a["bundleID"].asString() == "org.interop.alpha", "hello app: " + show(a));
        Json::Value x = client.CallMethod("hello", hello("extension", "org.interop.alpha.share", "alpha-secret"));
        check(x["role"].asString() == "extension", "hello extension: " + show(x));
    });

    Json::Value queuedEvent;
    run("tool_batch", [&queuedEvent] {
        BatchCall calls;
        int h = calls.addCall("hello", hello("tool"));
        int can = calls.addCall("url.canOpen", obj1("url", "interop-alpha://item/1"));
        int none = calls.addCall("url.open", obj1("url", "https://nowhere.interop.test/page"));
        int open = calls.addCall("url.open", obj1("url", "interop-alpha://from-cpp"));
        Json::Value items(Json::arrayValue);
        items.append(obj1("text", "from C++"));
        int share = calls.addCall("share.send", obj1("items", items));
        int bad = calls.addCall("no.such.method", Json::Value(Json::objectValue));
        BatchResponse r = batch(calls);
        check(r.getResult(h)["role"].asString() == "tool", "hello: " + show(r.getResult(h)));
        Json::Value c = r.getResult(can);
        check(c["canOpen"].asBool() && c["app"].asString() == "org.interop.alpha" && c["via"].asString() == "scheme",
              "url.canOpen: " + show(c));
        Json::Value noneID(none), badID(bad);
        check(r.hasErrors(), "hasErrors");
        check(r.getErrorCode(noneID) == -32004, "url.open with no handler: " + std::to_string(r.getErrorCode(noneID)));
        check(r.getErrorMessage(noneID).find("https://nowhere.interop.test/page") != std::string::npos,
              "-32004 message names the URL: " + r.getErrorMessage(noneID));
        check(r.getErrorCode(badID) == -32601, "unknown method in a batch");
        Json::Value o = r.getResult(open);
        check(o["queued"].asBool() && !o["delivered"].asBool() && o["eventID"].isString(), "url.open: " + show(o));
        queuedEvent = o["eventID"];
        Json::Value s = r.getResult(share);
        check(s["extension"].asString() == "org.interop.beta.action", "tool share.send of text: " + show(s));
    });

    run("app_batch", [&queuedEvent] {
        check(queuedEvent.isString(), "no event from tool_batch");
        BatchCall calls;
        calls.addCall("hello", hello("app", "org.interop.alpha", "alpha-secret"));
        int sub = calls.addCall("app.subscribe", Json::Value(Json::objectValue));
        Json::Value ids(Json::arrayValue);
        ids.append(queuedEvent);
        int ack = calls.addCall("app.ack", obj1("ids", ids));
        BatchResponse r = batch(calls);
        check(r.getResult(sub)["pending"].asInt() == 1, "app.subscribe: " + show(r.getResult(sub)));
        check(r.getResult(ack)["acked"].asInt() == 1, "app.ack: " + show(r.getResult(ack)));
        UnixDomainSocketClient connector(socketPath);
        Client client(connector);
        check(client.CallMethod("broker.status", Json::Value())["pendingEvents"].asInt() == 0, "pendingEvents");
    });

    run("extension_batch", [] {
        BatchCall calls;
        calls.addCall("hello", hello("extension", "org.interop.alpha.share", "alpha-secret"));
        Json::Value items(Json::arrayValue);
        items.append(obj1("url", "https://example.org/cpp"));
        int send = calls.addCall("share.send", obj1("items", items));
        Json::Value textItems(Json::arrayValue);
        textItems.append(obj1("text", "words"));
        int rejected = calls.addCall("share.send", obj1("items", textItems));
        BatchResponse r = batch(calls);
        Json::Value s = r.getResult(send);
        check(s["extension"].asString() == "org.interop.alpha.share" && s["group"].asString() == "group.org.interop.alpha",
              "share.send: " + show(s));
        Json::Value rid(rejected);
        check(r.getErrorCode(rid) == -32003, "share.send of text by a URL extension");

        BatchCall get;
        get.addCall("hello", hello("app", "org.interop.alpha", "alpha-secret"));
        int g = get.addCall("share.get", obj1("shareID", s["shareID"]));
        int done = get.addCall("share.complete", obj1("shareID", s["shareID"]));
        BatchResponse gr = batch(get);
        check(gr.getResult(g)["items"][0]["url"].asString() == "https://example.org/cpp", "share.get: " + show(gr.getResult(g)));
        check(gr.getResult(done)["completed"].asBool(), "share.complete");
    });

    run("defaults_batch", [] {
        BatchCall calls;
        calls.addCall("hello", hello("app", "org.interop.alpha", "alpha-secret"));
        Json::Value p(Json::objectValue);
        p["group"] = "group.org.interop.alpha";
        p["key"] = "cpp";
        Json::Value v(Json::objectValue);
        v["n"] = 42;
        v["s"] = "\xc3\xa9t\xc3\xa9 line\nnext\ttab \x01 \xf0\x9f\x98\x80";  // UTF-8, controls, an astral char
        v["big"] = std::string(200000, 'x');
        p["value"] = v;
        int set = calls.addCall("defaults.set", p);
        Json::Value q(Json::objectValue);
        q["group"] = "group.org.interop.alpha";
        q["key"] = "cpp";
        int get = calls.addCall("defaults.get", q);
        BatchResponse r = batch(calls);
        check(r.getResult(set)["version"].asInt() == 1, "defaults.set: " + show(r.getResult(set)));
        Json::Value g = r.getResult(get);
        check(g["exists"].asBool() && g["value"] == v, "defaults.get: " + show(g));
    });

    std::cout << "libjsonrpccpp: " << passed << " passed, " << failed << " failed" << std::endl;
    return failed == 0 && passed > 0 ? 0 : 1;
}
