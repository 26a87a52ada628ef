import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The admin console's files as served: the embedded bytes, their content types and caching, and a page whose
/// Content-Security-Policy forbids inline script and style, which the page itself does not use.
@Suite struct ConsoleRoutesTests {
    @Test @Loop func thePageItsScriptAndStyleSheetAreServedWithTheirTypes() async throws {
        let server = try await HTTPTestServer.start { router in ConsoleRoutes().register(on: router) }
        let page = try await server.request("/admin")
        #expect(page.status == 200)
        #expect(page.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(page.headers["Cache-Control"] == "no-cache, private")
        #expect(page.headers["X-Content-Type-Options"] == "nosniff")
        #expect(page.body == PackageResources.console_html)
        let policy = try #require(page.headers["Content-Security-Policy"])
        #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && policy.contains("style-src 'self'"))
        #expect(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"))

        let script = try await server.request("/admin/console.js")
        #expect(script.headers["Content-Type"] == "text/javascript; charset=utf-8")
        #expect(script.headers["Cache-Control"] == "private, max-age=300")
        #expect(script.body == PackageResources.console_js)
        let styles = try await server.request("/admin/console.css")
        #expect(styles.headers["Content-Type"] == "text/css; charset=utf-8")
        #expect(styles.body == PackageResources.console_css)
        await server.shutdown()
    }

    /// What the policy would refuse is not in the files: no inline script or handler, no style attribute, no
    /// markup built from strings in the script.
    @Test func theFilesNeedNothingThePolicyRefuses() {
        let html = String(decoding: PackageResources.console_html, as: UTF8.self)
        #expect(html.components(separatedBy: "<script").count == 2)
        #expect(html.contains("<script src=\"/admin/console.js\" defer></script>"))
        #expect(!html.contains("style=") && !html.contains("<style"))
        #expect(html.range(of: #"\son[a-z]+\s*="#, options: .regularExpression) == nil, "an inline event handler")
        let script = String(decoding: PackageResources.console_js, as: UTF8.self)
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", ".style"] {
            #expect(!script.contains(sink), "console.js uses \(sink)")
        }
        #expect(!script.contains("localStorage"), "the key belongs in sessionStorage only")
    }
}
