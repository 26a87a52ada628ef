import ServiceRuntime
import Foundation

extension PurchaseReportBody {
    /// The report as CSV (RFC 4180: CRLF line ends, a header row, fields quoted when they hold a comma, a quote
    /// or a line break). A field that a spreadsheet would read as a formula (`=`, `+`, `-`, `@` first) is
    /// prefixed with `'`. An empty price or revenue is an empty field. `trials` comes last, so that the columns
    /// before it keep the places they had before it was added.
    var csv: String {
        var lines = ["product_id,environment,product_type,count,refunded,units,price,price_currency,revenue,trials"]
        for row in rows {
            let fields = [row.productID, row.environment, row.productType ?? "", String(row.count), String(row.refunded),
                          String(row.units), row.price ?? "", row.priceCurrency ?? "", row.revenue ?? "", String(row.trials)]
            lines.append(fields.map(Self.csvField).joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    static func csvField(_ text: String) -> String {
        let safe = text.first.map { "=+-@".contains($0) } == true && Double(text) == nil ? "'" + text : text
        guard safe.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return safe }
        return "\"" + safe.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
