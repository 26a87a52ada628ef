/// Tasks that run on the loop and prefer it as their task executor (`EventLoop.taskExecutor`): a continuation
/// resumed under them (a PostgreSQL answer, a curl transfer's end) and the nonisolated code they await run on
/// the loop thread at once, instead of going through the global executor's threads and hopping back.
extension Task where Failure == Never {
    /// Runs `operation` as a new task on the loop.
    @discardableResult
    public static func onLoop(_ operation: @escaping @Loop @Sendable () async -> Success) -> Task<Success, Never> {
        Task(executorPreference: EventLoop.shared.taskExecutor, operation: operation)
    }
}

extension Task where Failure == any Error {
    /// Runs the throwing `operation` as a new task on the loop.
    @discardableResult
    public static func onLoop(_ operation: @escaping @Loop @Sendable () async throws -> Success) -> Task<Success, any Error> {
        Task(executorPreference: EventLoop.shared.taskExecutor, operation: operation)
    }
}
