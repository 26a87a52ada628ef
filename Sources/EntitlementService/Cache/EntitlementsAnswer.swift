import ServiceRuntime
import EntitlementModel
import Foundation

/// The cached form of a `GET /v1/users/{user_id}/entitlements` answer: its JSON body without the `as_of`
/// value, which is spliced back in at serve time, so a hit answers the time of the answer with no encoding.
///
/// The body's keys are sorted, so it always opens with `{"as_of":"` and the timestamp; the template is the
/// body with the timestamp's bytes cut out.
enum EntitlementsAnswer {
    /// What every body opens with, up to the `as_of` value.
    private static let head: [UInt8] = Array(#"{"as_of":""#.utf8)

    /// `body` (encoded with `as_of` = `asOf`) without its timestamp; nil when it is not shaped so.
    static func template(of body: [UInt8], asOf: Date) -> [UInt8]? {
        var stamp = [UInt8]()
        RFC3339.append(asOf, to: &stamp)
        guard body.starts(with: head), body.dropFirst(head.count).starts(with: stamp) else { return nil }
        var template = body
        template.removeSubrange(head.count..<(head.count + stamp.count))
        return template
    }

    /// The answer of `template` with `as_of` = `now`: one allocation, the body's.
    static func response(_ template: [UInt8], at now: Date) -> HTTPResponse {
        var body = [UInt8]()
        body.reserveCapacity(template.count + 20)
        body.append(contentsOf: template[..<head.count])
        RFC3339.append(now, to: &body)
        body.append(contentsOf: template[head.count...])
        return .json(encoded: body)
    }
}
