import Foundation
import Testing
import EntitlementModel

@Suite struct CatalogTests {
    private static let sample = """
        {"products": [
          {"product_id": "com.example.premium.monthly", "type": "auto_renewable", "entitlements": ["premium"],
           "price": "4.99", "price_currency": "USD", "subscription_group": "20662382"},
          {"product_id": "com.example.lifetime", "type": "non_consumable", "entitlements": ["premium", "themes"]},
          {"product_id": "com.example.pass.month", "type": "non_renewing", "entitlements": ["premium"],
           "duration": "P1M", "price": "9.99", "price_currency": "EUR"},
          {"product_id": "com.example.coins.100", "type": "consumable", "currency": "coins", "amount": 100},
          {"product_id": "com.example.coins.badge", "type": "consumable", "entitlements": [], "currency": "coins",
           "amount": 5, "price": "0.99", "price_currency": "USD", "unknown_field": true}
        ]}
        """

    private func catalogError(_ json: String) -> CatalogError? {
        do {
            _ = try Catalog(json: Data(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    /// A catalog of one product whose fields are `fields` (JSON object members).
    private func productError(_ fields: String) -> CatalogError? {
        catalogError(#"{"products": [{"product_id": "p.ok", "type": "non_consumable", "entitlements": ["a"]}, {"#
                     + fields + "}]}")
    }

    @Test func decodesTheCatalogFile() throws {
        let catalog = try Catalog(json: Data(Self.sample.utf8))
        #expect(catalog.products.map(\.productID) == [
            "com.example.premium.monthly", "com.example.lifetime", "com.example.pass.month",
            "com.example.coins.100", "com.example.coins.badge",
        ])
        let monthly = try #require(catalog.product("com.example.premium.monthly"))
        #expect(monthly.type == .autoRenewable)
        #expect(monthly.entitlements == ["premium"])
        #expect(monthly.price == "4.99")
        #expect(monthly.priceCurrency == "USD")
        #expect(monthly.subscriptionGroup == "20662382")
        #expect(monthly.duration == nil)

        let pass = try #require(catalog.product("com.example.pass.month"))
        #expect(pass.duration == ISODuration(months: 1))

        let coins = try #require(catalog.product("com.example.coins.100"))
        #expect(coins.type == .consumable)
        #expect(coins.entitlements.isEmpty)
        #expect(coins.currency == "coins")
        #expect(coins.amount == 100)
        #expect(coins.price == nil)

        #expect(catalog.product("com.example.unknown") == nil)
    }

    @Test func encodesBackToTheSameShape() throws {
        let catalog = try Catalog(json: Data(Self.sample.utf8))
        let encoded = try JSONEncoder().encode(catalog)
        #expect(try Catalog(json: encoded) == catalog)

        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Array(object.keys) == ["products"])
        let products = try #require(object["products"] as? [[String: Any]])
        #expect(Set(products[0].keys) == [
            "product_id", "type", "entitlements", "price", "price_currency", "subscription_group",
        ])
        #expect(Set(products[2].keys) == ["product_id", "type", "entitlements", "duration", "price", "price_currency"])
        #expect(products[2]["duration"] as? String == "P1M")
        #expect(Set(products[3].keys) == ["product_id", "type", "entitlements", "currency", "amount"])
        #expect((products[3]["entitlements"] as? [Any])?.isEmpty == true)
        #expect(products[3]["amount"] as? Int == 100)
    }

    @Test func decodesOneProductForTheAdminAPI() throws {
        let json = #"{"product_id": "p.pass", "type": "non_renewing", "entitlements": ["premium"], "duration": "P2W"}"#
        let product = try Product(json: Data(json.utf8))
        #expect(product.duration == ISODuration(weeks: 2))
        #expect(throws: CatalogError(field: "duration", reason: "is required for non_renewing products (e.g. \"P1M\")")) {
            try Product(json: Data(#"{"product_id": "p.pass", "type": "non_renewing", "entitlements": ["x"]}"#.utf8))
        }
    }

    /// What decides a catalog change's events: only the fields the entitlement rules read.
    @Test func productsUnlockAlikeWhenTypeEntitlementsDurationAndGroupAgree() throws {
        let pass = try Product(productID: "p.pass", type: .nonRenewing, entitlements: ["a", "b"], duration: ISODuration(months: 1),
                               subscriptionGroup: "g")
        let repriced = try Product(productID: "p.pass", type: .nonRenewing, entitlements: ["b", "a"], duration: ISODuration(months: 1),
                                   currency: "coins", amount: 3, price: "1.99", priceCurrency: "EUR", subscriptionGroup: "g")
        #expect(pass.unlocksAlike(repriced) && repriced.unlocksAlike(pass))
        #expect(!pass.unlocksAlike(nil))
        for other in [
            try Product(productID: "p.pass", type: .nonRenewing, entitlements: ["a"], duration: ISODuration(months: 1), subscriptionGroup: "g"),
            try Product(productID: "p.pass", type: .nonRenewing, entitlements: ["a", "b"], duration: ISODuration(months: 2), subscriptionGroup: "g"),
            try Product(productID: "p.pass", type: .nonRenewing, entitlements: ["a", "b"], duration: ISODuration(months: 1)),
            try Product(productID: "p.pass", type: .nonConsumable, entitlements: ["a", "b"], duration: ISODuration(months: 1), subscriptionGroup: "g"),
            try Product(productID: "p.other", type: .nonRenewing, entitlements: ["a", "b"], duration: ISODuration(months: 1), subscriptionGroup: "g"),
        ] {
            #expect(!pass.unlocksAlike(other), "\(other)")
        }
    }

    @Test func validatesProductsMadeInCode() throws {
        let product = try Product(productID: "p.coins", type: .consumable, currency: "coins", amount: 10)
        #expect(product.entitlements.isEmpty)
        #expect(throws: CatalogError(field: "amount", reason: "must be an integer from 1 to 1000000000000")) {
            try Product(productID: "p.coins", type: .consumable, currency: "coins", amount: 0)
        }
        #expect(throws: CatalogError(field: "entitlements[1]", reason: "repeats entitlement \"a\"")) {
            try Product(productID: "p.life", type: .nonConsumable, entitlements: ["a", "a"])
        }
    }

    @Test(arguments: [
        // Per-type requirements.
        (#""product_id": "p.x", "type": "non_renewing", "entitlements": ["a"]"#,
         "products[1].duration", "is required for non_renewing products (e.g. \"P1M\")"),
        (#""product_id": "p.x", "type": "consumable", "amount": 5"#,
         "products[1].currency", "is required for consumable products"),
        (#""product_id": "p.x", "type": "consumable", "currency": "coins""#,
         "products[1].amount", "is required for consumable products"),
        (#""product_id": "p.x", "type": "non_consumable""#,
         "products[1].entitlements", "must name at least one entitlement for non_consumable products"),
        (#""product_id": "p.x", "type": "auto_renewable", "entitlements": []"#,
         "products[1].entitlements", "must name at least one entitlement for auto_renewable products"),
        (#""product_id": "p.x", "type": "non_renewing", "entitlements": [], "duration": "P1M""#,
         "products[1].entitlements", "must name at least one entitlement for non_renewing products"),
        // Field values.
        (#""product_id": "p.x", "type": "consumable", "currency": "coins", "amount": 0"#,
         "products[1].amount", "must be an integer from 1 to 1000000000000"),
        (#""product_id": "p.x", "type": "consumable", "currency": "coins", "amount": -3"#,
         "products[1].amount", "must be an integer from 1 to 1000000000000"),
        (#""product_id": "p.x", "type": "consumable", "currency": "coins", "amount": 1000000000001"#,
         "products[1].amount", "must be an integer from 1 to 1000000000000"),
        (#""product_id": "p.x", "type": "consumable", "currency": "coins", "amount": 1.5"#,
         "products[1].amount", "must be an integer from 1 to 1000000000000"),
        (#""product_id": "p.x", "type": "consumable", "currency": "coins", "amount": "5""#,
         "products[1].amount", "must be an integer from 1 to 1000000000000"),
        (#""product_id": "p.x", "type": "consumable", "currency": "my coins", "amount": 5"#,
         "products[1].currency", "must be 1–255 letters, digits, \".\", \"_\" or \"-\""),
        (#""product_id": "p.x", "type": "non_renewing", "entitlements": ["a"], "duration": "PT1H""#,
         "products[1].duration", "must count years, months, weeks or days (PnY, PnM, PnW, PnD), not hours, minutes or seconds"),
        (#""product_id": "p.x", "type": "non_renewing", "entitlements": ["a"], "duration": "P1DT12H""#,
         "products[1].duration", "must count years, months, weeks or days (PnY, PnM, PnW, PnD), not hours, minutes or seconds"),
        (#""product_id": "p.x", "type": "non_renewing", "entitlements": ["a"], "duration": "1 month""#,
         "products[1].duration",
         "must start with \"P\"; expected an ISO 8601 duration such as P1M, P7D or P1Y"),
        (#""product_id": "p.x", "type": "non_renewing", "entitlements": ["a"], "duration": "P0D""#,
         "products[1].duration", "must be longer than zero"),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a", ""]"#,
         "products[1].entitlements[1]", "must be 1–255 characters without control characters"),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a", 3]"#,
         "products[1].entitlements[1]", "must be a string"),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": "a""#,
         "products[1].entitlements", "must be an array"),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price": 4.99"#,
         "products[1].price", "must be a decimal string such as \"4.99\""),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price": "4,99""#,
         "products[1].price", "must be a decimal string such as \"4.99\""),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price": ".99""#,
         "products[1].price", "must be a decimal string such as \"4.99\""),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price": "-1""#,
         "products[1].price", "must be a decimal string such as \"4.99\""),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price_currency": "usd""#,
         "products[1].price_currency", "must be an ISO 4217 code such as \"USD\""),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price": "4.99""#,
         "products[1].price_currency", "is required with price"),
        (#""product_id": "p.x", "type": "non_consumable", "entitlements": ["a"], "price_currency": "USD""#,
         "products[1].price", "is required with price_currency"),
        (#""product_id": "p.x", "type": "auto_renewable", "entitlements": ["a"], "subscription_group": """#,
         "products[1].subscription_group", "must be 1–255 characters without control characters"),
        (#""product_id": "p x", "type": "non_consumable", "entitlements": ["a"]"#,
         "products[1].product_id", "must be 1–255 letters, digits, \".\", \"_\" or \"-\""),
        (#""product_id": "", "type": "non_consumable", "entitlements": ["a"]"#,
         "products[1].product_id", "must be 1–255 letters, digits, \".\", \"_\" or \"-\""),
        // Shape.
        (#""type": "non_consumable", "entitlements": ["a"]"#, "products[1].product_id", "is required"),
        (#""product_id": null, "type": "non_consumable", "entitlements": ["a"]"#,
         "products[1].product_id", "must not be null"),
        (#""product_id": 7, "type": "non_consumable", "entitlements": ["a"]"#,
         "products[1].product_id", "must be a string"),
        (#""product_id": "p.x", "entitlements": ["a"]"#, "products[1].type", "is required"),
        (#""product_id": "p.x", "type": "subscription", "entitlements": ["a"]"#,
         "products[1].type", "must be one of consumable, non_consumable, auto_renewable, non_renewing"),
        (#""product_id": "p.ok", "type": "non_consumable", "entitlements": ["a"]"#,
         "products[1].product_id", "repeats product \"p.ok\""),
    ])
    func namesTheFieldAtFault(fields: String, field: String, reason: String) {
        #expect(productError(fields) == CatalogError(field: field, reason: reason))
    }

    @Test func namesDocumentLevelFaults() {
        #expect(catalogError("{}") == CatalogError(field: "products", reason: "is required"))
        #expect(catalogError(#"{"products": {}}"#) == CatalogError(field: "products", reason: "must be an array"))
        #expect(catalogError("[]") == CatalogError(field: "", reason: "must be an object"))
        #expect(catalogError("{\"products\": [") == CatalogError(field: "", reason: "the document is not valid JSON"))
        #expect(catalogError(#"{"products": [7]}"#) == CatalogError(field: "products[0]", reason: "must be an object"))
        #expect(catalogError(#"{"products": []}"#) == nil)
    }

    @Test func describesErrorsWithTheirField() {
        #expect(CatalogError(field: "products[2].duration", reason: "is required").description
            == "products[2].duration: is required")
        #expect(CatalogError(field: "", reason: "the document is not valid JSON").description
            == "the document is not valid JSON")
    }

    @Test func rejectsRepeatedProductIDsMadeInCode() throws {
        let product = try Product(productID: "p.a", type: .nonConsumable, entitlements: ["a"])
        #expect(throws: CatalogError(field: "products[1].product_id", reason: "repeats product \"p.a\"")) {
            try Catalog(products: [product, product])
        }
    }
}
