// Router: URL patterns mapped to typed async handlers, for the URLs an app receives (app.event
// openURL / continueUserActivity), and the inverse: building correctly percent-encoded URLs from
// a pattern and values (what seed 004 did by hand with addingPercentEncoding and a fatalError).

import Foundation

/// Routes URLs to handlers by pattern; see `RoutePattern` for the pattern syntax.
///
/// ```swift
/// var router = Router()
/// try router.add("DeepLinkingDemo://customerdetail?id=:id") { m in showCustomer(try m.require("id")) }
/// try router.add("https://example.com/computers/:slug") { m in showComputer(m.string("slug")!) }
/// for try await event in try await client.subscribe() {
///     try await router.handle(event)
///     try await event.ack()
/// }
/// ```
///
/// Routes are tried in the order they were added; the first that matches handles the URL.
public struct Router: Sendable {
    /// A route's handler: receives what the URL carried.
    public typealias Handler = @Sendable (RouteMatch) async throws -> Void

    /// One registered route.
    public struct Route: Sendable {
        /// Its pattern.
        public let pattern: RoutePattern
        let handler: Handler
    }

    /// The routes, in the order they are tried.
    public private(set) var routes: [Route] = []
    /// How URLs are matched (form decoding of `+`, path case sensitivity).
    public var options: RouteOptions

    /// An empty router.
    public init(options: RouteOptions = RouteOptions()) {
        self.options = options
    }

    /// Adds a route; throws `RouterError.invalidPattern` when the pattern is not valid.
    public mutating func add(_ pattern: String, _ handler: @escaping Handler) throws(RouterError) {
        routes.append(Route(pattern: try RoutePattern(pattern), handler: handler))
    }

    /// Adds a route with a parsed pattern.
    public mutating func add(_ pattern: RoutePattern, _ handler: @escaping Handler) {
        routes.append(Route(pattern: pattern, handler: handler))
    }

    /// The first route's match for `url`, or nil when no route matches.
    public func match(_ url: String) -> RouteMatch? {
        for route in routes {
            if let m = route.pattern.match(url, options: options) { return m }
        }
        return nil
    }

    /// The first route's match for a Foundation `URL`.
    public func match(_ url: URL) -> RouteMatch? { match(url.absoluteString) }

    /// Runs the handler of the first route that matches `url`; false when none matches.
    /// Errors the handler throws are passed on.
    @discardableResult
    public func handle(_ url: String) async throws -> Bool {
        for route in routes {
            if let m = route.pattern.match(url, options: options) {
                try await route.handler(m)
                return true
            }
        }
        return false
    }

    /// Routes an app event's URL (`url` of openURL, `webpageURL` of continueUserActivity);
    /// false when the event has no URL or no route matches. Errors the handler throws are
    /// passed on (a `RouterError.missingParameter` from `require`, for a URL without a value the
    /// pattern does not require; whatever the handler's own calls throw).
    @discardableResult
    public func handle(_ event: AppEvent) async throws -> Bool {
        guard let url = event.url else { return false }
        return try await handle(url)
    }

    /// Builds a URL from `pattern` and `values`, percent-encoding every value (see
    /// `RoutePattern.build`). Throws a `RouterError` (never crashes) when the pattern is invalid
    /// or a required value is missing.
    public static func build(_ pattern: String, values: [String: String]) throws(RouterError) -> String {
        try RoutePattern(pattern).build(values)
    }

    /// Same as `Router.build(_:values:)`, and throws as it does.
    public func build(_ pattern: String, values: [String: String]) throws(RouterError) -> String {
        try Router.build(pattern, values: values)
    }
}
