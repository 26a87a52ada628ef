import CUV
import Foundation
import Testing
@testable import ServiceRuntime

/// `PostgresListener` and the connection's notification and close handlers against the real server.
@Suite struct PostgresListenerTests {
    /// A listener on `channels` whose notifications and states land in inboxes.
    @Loop final class Harness {
        let notifications = Inbox<PostgresNotification>()
        let states = Inbox<Bool>()
        /// The end of the answer window the listener reported last (loop time, ms).
        private(set) var windowEnd: UInt64?
        private(set) var listener: PostgresListener!

        init(channels: [String], configure: (inout PostgresListener.Settings) -> Void = { _ in }) throws {
            var settings = PostgresListener.Settings(conninfo: try TestDatabase.url(), channels: channels)
            configure(&settings)
            listener = PostgresListener(settings, onNotification: { [notifications] in notifications.record($0) },
                                        onStateChange: { [states] in states.record($0) },
                                        onWindow: { [unowned self] in windowEnd = $0 })
        }

        /// Starts the listener and waits until it listens.
        func start() async throws {
            listener.start()
            _ = try await states.take("listening") { $0 }
        }
    }

    @Test @Loop func connectionHandsNotificationsToItsHandlerAndReportsItsClose() async throws {
        let listening = try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000)
        let sender = try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000)
        defer { sender.close() }
        let notifications = Inbox<PostgresNotification>()
        let closes = Inbox<PostgresError>()
        listening.onNotification = { notifications.record($0) }
        listening.onClose = { closes.record($0) }
        let channel = TestDatabase.uniqueTableName("channel")
        _ = try await listening.query("LISTEN \(channel)")
        _ = try await sender.query("SELECT pg_notify($1, $2)", channel, "hello")
        _ = try await sender.query("NOTIFY \(channel)")
        let received = try await notifications.take("two notifications") { $0.payload.isEmpty }
        #expect(received == [
            PostgresNotification(channel: channel, payload: "hello", senderPID: sender.backendPID),
            PostgresNotification(channel: channel, payload: "", senderPID: sender.backendPID),
        ])
        listening.close()
        listening.close()
        #expect(closes.items.count == 1, "the close handler runs once")
        #expect(closes.items.first?.kind == .connection)
    }

    @Test @Loop func notificationsArriveWithTheirPayloadsInCommitOrder() async throws {
        let channels = [TestDatabase.uniqueTableName("a"), TestDatabase.uniqueTableName("b")]
        let harness = try Harness(channels: channels)
        try await harness.start()
        let sender = try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000)
        defer { sender.close() }
        let payloads = ["user-1", "ünïcödé ✓", "with 'quotes' and \"double\"", String(repeating: "x", count: 7_000)]
        for (index, payload) in payloads.enumerated() {
            _ = try await sender.query("SELECT pg_notify($1, $2)", channels[index % 2], payload)
        }
        let received = try await harness.notifications.take("the last payload") { $0.payload == payloads.last }
        #expect(received.map(\.payload) == payloads)
        #expect(received.map(\.channel) == [channels[0], channels[1], channels[0], channels[1]])
        #expect(received.allSatisfy { $0.senderPID == sender.backendPID })
        await harness.listener.stop()
    }

    @Test @Loop func aTerminatedBackendIsNoticedAndTheListenerListensAgain() async throws {
        let channel = TestDatabase.uniqueTableName("channel")
        let harness = try Harness(channels: [channel])
        try await harness.start()
        let admin = try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000)
        defer { admin.close() }
        let first = try #require(harness.listener.backendPID)
        _ = try await admin.query("SELECT pg_terminate_backend($1::int)", Int(first))
        _ = try await harness.states.take("not listening") { !$0 }
        _ = try await harness.states.take("listening again") { $0 }
        let second = try #require(harness.listener.backendPID)
        #expect(second != first)
        _ = try await admin.query("SELECT pg_notify($1, 'after')", channel)
        _ = try await harness.notifications.take("a notification after the reconnect") { $0.payload == "after" }
        await harness.listener.stop()
        #expect(harness.states.items == [false])
        #expect(!harness.listener.isListening)
    }

    /// A stopped backend keeps its TCP connection open but never answers, as a half-open connection does.
    @Test @Loop func aBackendThatStopsAnsweringIsGivenUpWithinThePingTimeout() async throws {
        let harness = try Harness(channels: [TestDatabase.uniqueTableName("channel")]) { settings in
            settings.pingIntervalMs = 100
            settings.pingTimeoutMs = 300
        }
        try await harness.start()
        let frozen = try #require(harness.listener.backendPID)
        #expect(kill(frozen, SIGSTOP) == 0, "the test signals the server's backend (it runs as root or as its owner)")
        defer { kill(frozen, SIGCONT) }
        let started = DispatchTime.now()
        _ = try await harness.states.take(timeoutMs: 5_000, "not listening") { !$0 }
        let noticedMs = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e6
        #expect(noticedMs < 2_000, "noticed after \(noticedMs) ms")
        _ = try await harness.states.take("listening again") { $0 }
        #expect(harness.listener.backendPID != frozen)
        await harness.listener.stop()
    }

    /// A process paused past the answer window (stopped, swapped out) runs the I/O callbacks of its wake-up before
    /// its timers: the window's end the listener reported, read on the loop's clock, has passed there, before its
    /// timer says it stopped listening.
    @Test @Loop func theAnswerWindowsEndIsReportedForTheClockNotOnlyByItsTimer() async throws {
        let harness = try Harness(channels: [TestDatabase.uniqueTableName("channel")]) { settings in
            settings.pingIntervalMs = 100
            settings.answerWindowMs = 300
        }
        try await harness.start()
        let end = try #require(harness.windowEnd)
        #expect(EventLoop.shared.now < end && end <= EventLoop.shared.now + 300)
        usleep(400_000)  // the loop itself held, as a paused process is
        uv_update_time(EventLoop.shared.uv)  // what the loop does when its poll returns, before any callback
        #expect(harness.listener.isListening, "its timer has not run yet")
        #expect(EventLoop.shared.now >= (harness.windowEnd ?? 0))
        await harness.listener.stop()
    }

    @Test func channelNamesAreQuotedIdentifiers() {
        #expect(PostgresListener.quoted("entitlements_changed") == "\"entitlements_changed\"")
        #expect(PostgresListener.quoted("we\"ird") == "\"we\"\"ird\"")
    }
}
