import ServiceRuntime
extension APIKeys {
    /// The caller of a `/v1` request, or a 401/403 problem: 401 without a valid key, 403 for an app key on an
    /// admin route. The problem never repeats what was presented.
    func authorize(_ request: HTTPRequest, admin: Bool) throws -> Caller {
        guard let caller = authenticate(authorization: request.headers["Authorization"]) else {
            throw ProblemError(status: 401, detail: "A valid 'Authorization: Bearer <key>' header is required.",
                               extra: ["field": "Authorization"])
        }
        if admin && caller.scope != .admin {
            throw ProblemError(status: 403, detail: "This route needs an admin key.")
        }
        return caller
    }
}
