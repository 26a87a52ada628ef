import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

@Suite struct CommandTests {
    @Test func parsesEveryCommand() throws {
        #expect(try Command.parse(["serve"]) == .serve)
        #expect(try Command.parse(["migrate"]) == .migrate)
        #expect(try Command.parse(["--help"]) == .help)
        #expect(try Command.parse(["fake-app-store", "--port", "0"]) == .fakeAppStore(port: 0, host: "127.0.0.1"))
        #expect(try Command.parse(["fake-app-store", "--host", "::1", "--port", "9000"]) == .fakeAppStore(port: 9000, host: "::1"))
        #expect(try Command.parse(["fake-app-store", "--root-certificate-out", "/tmp/root.der", "--port", "0"])
                == .fakeAppStore(port: 0, host: "127.0.0.1", rootCertificateOut: "/tmp/root.der"))
    }

    @Test(arguments: [[], ["bogus"], ["serve", "now"], ["fake-app-store"], ["fake-app-store", "--port"], ["fake-app-store", "--port", "x"], ["fake-app-store", "--size", "1"], ["fake-app-store", "--port", "0", "--root-certificate-out"]])
    func rejectsAnythingElse(arguments: [String]) {
        #expect(throws: CommandError.self) { try Command.parse(arguments) }
    }
}
