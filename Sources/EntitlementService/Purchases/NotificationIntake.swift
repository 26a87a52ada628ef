import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// The one way an App Store notification enters the service, whether Apple posts it or it is recovered from
/// Apple's notification history: a version 2 `signedPayload` verified with its signed transaction and renewal
/// info by the one `SignedDataVerifier`, stored once per `notificationUUID` (`NotificationStore`, a unique
/// key) and then applied where possible (`PurchaseRecorder.applyReceived`); what could not be applied is left
/// `received` for `NotificationWorker`.
@Loop
struct NotificationIntake {
    let signatures: SignedDataVerifier
    let db: PostgresPool
    let recorder: PurchaseRecorder
    let catalog: CatalogCache
    /// How long a stored notification is left to its caller's application before the worker may take it.
    let lease: Duration
    let store = NotificationStore()

    /// What taking a notification came to.
    struct Outcome: Sendable {
        /// False when a notification with its uuid was stored already (nothing changed).
        var stored: Bool
        /// Where the notification stands when it was stored by this call.
        var state: NotificationState
    }

    /// Stores `notification` unless its uuid is stored already, then applies it when it is `received`:
    /// `applied` or `parked`, or still `received` when applying failed (the worker applies it then). A copy of
    /// one stored already that is still `received` (Apple sending again what a process that died before applying
    /// it had stored) is applied now too, rather than left to the worker's lease. A database failure to store it
    /// is thrown: nothing was stored.
    func take(_ notification: StoredNotification) async throws -> Outcome {
        let stored = try await store.insert(notification, lease: lease, on: db)
        guard notification.state == .received else { return Outcome(stored: stored, state: notification.state) }
        do {
            let application = try await recorder.applyReceived(notification)
            return Outcome(stored: stored, state: application.map { $0.owner == nil ? .parked : .applied } ?? .applied)
        } catch {
            Log.warning("app_store_notification_apply_deferred", ["notification_uuid": notification.uuid, "error": String(describing: error)])
            return Outcome(stored: stored, state: .received)
        }
    }

    /// A version 2 notification verified with its signed parts, ready to store: `received`, or `ignored` when
    /// it records nothing. Throws 401 when a signature or chain does not verify, 422 when a part verifies but
    /// is for another app or environment or does not decode, or the payload has no `notificationUUID`.
    func verified(_ jws: String) async throws -> StoredNotification {
        let verified = try await verify(part: "signedPayload") { () async throws(SignedDataError) in try await signatures.verifyNotification(jws) }
        let notification = verified.payload
        guard let uuid = notification.notificationUUID, InputRules.isText(uuid, maxLength: 200) else {
            throw ProblemError(status: 422, detail: "The signed payload has no notificationUUID.", extra: ["field": "signedPayload"])
        }
        var transaction: VerifiedSignedData<AppStoreTransactionV2>?
        if let info = notification.signedTransactionInfo {
            transaction = try await verify(part: "data.signedTransactionInfo") { () async throws(SignedDataError) in try await signatures.verifyTransaction(info) }
        }
        var renewal: VerifiedSignedData<AppStoreRenewalInfoV2>?
        if let info = notification.signedRenewalInfo {
            renewal = try await verify(part: "data.signedRenewalInfo") { () async throws(SignedDataError) in try await signatures.verifyRenewalInfo(info) }
        }
        let state: NotificationState = switch notification.disposition {
        case .record: .received
        case .ignore: .ignored
        }
        return StoredNotification(
            uuid: uuid, version: 2, type: Self.withoutNUL(notification.notificationType), subtype: notification.subtype.map(Self.withoutNUL),
            signedDate: notification.signedDate ?? verified.signedDate ?? Date(),
            environment: verified.environment.rawValue,
            originalTransactionID: (transaction?.payload.transaction.originalTransactionID ?? renewal?.payload.renewal.originalTransactionID)
                .map(verified.environment.recordedID),
            transactionID: (transaction?.payload.transaction.transactionID).map(verified.environment.recordedID), signedPayload: jws,
            transactionInfo: transaction.map { Self.storable($0.json) }, renewalInfo: renewal.map { Self.storable($0.json) }, state: state)
    }

    /// `text` as a PostgreSQL text value can hold it: no NUL (U+FFFD instead), so that a notification carrying one
    /// (only a future field of Apple's could) is stored, not lost to a failed insert.
    private static func withoutNUL(_ text: String) -> String {
        text.contains("\u{0}") ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
    }

    /// A signed part's JSON as `jsonb` can hold it: its escaped NULs (`\u0000`, which jsonb refuses) become
    /// `\ufffd`; a backslash escaped itself (`\\u0000`, text that reads `\u0000`) is left as it is.
    static func storable(_ json: Data) -> Data {
        let bytes = [UInt8](json), escape: [UInt8] = Array("\\u0000".utf8)
        guard bytes.count >= escape.count else { return json }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0, backslashes = 0, changed = false
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\\"), backslashes % 2 == 0, bytes[index...].starts(with: escape) {
                out.append(contentsOf: Array("\\ufffd".utf8))
                index += escape.count
                backslashes = 0
                changed = true
                continue
            }
            backslashes = bytes[index] == UInt8(ascii: "\\") ? backslashes + 1 : 0
            out.append(bytes[index])
            index += 1
        }
        return changed ? Data(out) : json
    }

    /// The payload `verify` verifies (the notification or one of its `part`s): 401 when its signature or chain
    /// does not verify, 422 when it verifies but is for another app or environment or does not decode. The
    /// reason is logged.
    private func verify<Payload>(part: String, _ verify: () async throws(SignedDataError) -> VerifiedSignedData<Payload>) async throws -> VerifiedSignedData<Payload> {
        do {
            return try await verify()
        } catch {
            Log.warning("app_store_notification_refused", ["part": part, "status": error.status.rawValue, "reason": error.reason])
            if error.isAuthenticityFailure {
                throw ProblemError(status: 401, detail: "The signed payload (\(part)) is not signed by a trusted App Store certificate chain.",
                                   extra: ["field": "signedPayload"])
            }
            let at = error.field.map { "\(part): \($0)" } ?? part
            throw ProblemError(status: 422, detail: "The signed payload (\(at)) does not decode or is for another app or environment.",
                               extra: ["field": "signedPayload"])
        }
    }
}
