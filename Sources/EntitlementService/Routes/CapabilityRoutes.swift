import ServiceRuntime

/// `GET /v1/admin/capabilities`: which optional features this service's configuration enables, so that a
/// client (the console) offers only actions that can work: `app_store_server_api` (an App Store Server API key
/// is configured: refresh from Apple and attaching an App Store order id answer rather than 501) and `webhooks`
/// (`WEBHOOK_URL` is set: events are sent, and can be sent again). Under `/v1/admin` (an admin key).
@Loop
struct CapabilityRoutes {
    let appStoreServerAPI: Bool
    let webhooks: Bool

    func register(on admin: RouterGroup) {
        let body = ["app_store_server_api": appStoreServerAPI, "webhooks": webhooks]
        admin.get("/capabilities") { _, _ in .json(body) }
    }
}
