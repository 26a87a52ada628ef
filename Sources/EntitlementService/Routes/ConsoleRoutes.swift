import ServiceRuntime

/// The admin console: `GET /admin` and its script and style sheet, embedded at build time (SwiftPM's
/// `embedInCode`, like the OpenAPI document) so no file is read at run time. The page holds no secret and needs
/// no key: it asks for an admin key and sends it only as a bearer header on its API calls.
@Loop
struct ConsoleRoutes {
    func register(on router: Router) {
        router.get("/admin") { _, _ in Self.page }
        router.get("/admin/console.js") { _, _ in Self.script }
        router.get("/admin/console.css") { _, _ in Self.styleSheet }
    }

    /// Scripts and styles only from this origin, API calls only to it, no inline script or style, no framing,
    /// no form posted elsewhere: a value from the API that slipped into markup still could not run.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    private static let page = asset(PackageResources.console_html, "text/html; charset=utf-8", policy: true)
    private static let script = asset(PackageResources.console_js, "text/javascript; charset=utf-8", policy: false)
    private static let styleSheet = asset(PackageResources.console_css, "text/css; charset=utf-8", policy: false)

    /// The page is revalidated on every load (a new build serves a new page at once); its assets are kept for
    /// five minutes. None may be stored by a shared cache, and none is sniffed as another type.
    private static func asset(_ body: [UInt8], _ contentType: String, policy: Bool) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", contentType)
        headers.add("Cache-Control", policy ? "no-cache, private" : "private, max-age=300")
        headers.add("X-Content-Type-Options", "nosniff")
        if policy {
            headers.add("Content-Security-Policy", contentSecurityPolicy)
            headers.add("Referrer-Policy", "no-referrer")
        }
        return HTTPResponse(status: 200, headers: headers, body: body)
    }
}
