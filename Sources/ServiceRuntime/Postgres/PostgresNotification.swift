/// One notification a `LISTEN`ing connection received (sent by `NOTIFY` or `pg_notify`).
public struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    public var channel: String
    /// Its payload (empty when none was given).
    public var payload: String
    /// The process ID of the server backend that sent it.
    public var senderPID: Int32

    /// A notification with these values; nothing is validated.
    public init(channel: String, payload: String, senderPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.senderPID = senderPID
    }
}
