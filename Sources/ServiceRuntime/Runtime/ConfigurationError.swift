/// One bad or missing environment variable: start-up stops with one line naming it.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    /// The variable's name, e.g. `DATABASE_URL`.
    public var variable: String
    /// What is wrong with it, e.g. "is required".
    public var problem: String
    public var description: String { "configuration error: \(variable) \(problem)" }

    /// An error with these values; `description` reads `configuration error: <variable> <problem>`.
    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }
}
