import AppStore
import Crypto
import Foundation
import X509

/// bench/signed's driver: how many App Store-signed transactions `SignedDataVerifier` verifies per second on
/// one thread, with its chain cache (the steady state: a known leaf) and without it (every payload validates
/// its chain), against the reference of the same run: swift-crypto's bare ES256 verification of the same
/// signatures, with the key, signature and signed bytes prepared beforehand. The three alternate in 50 ms
/// slices (cold, cached, bare, cold, bare, cached…) for `--rounds` rounds of `--seconds` each, so that drifts
/// of the machine's speed, and the cold verification's disturbance of the processor's caches, touch cached
/// and bare alike.
///
/// The payloads are real App Store transactions (the shared fixtures' `jws_transaction_*_sandbox_gopay.jws`,
/// Apple Root CA - G3, WWDR G6), verified at their own `signedDate` as the service verifies them.
enum SignedBenchmark {
    struct Options {
        var fixtures = "../shared/fixtures/apple"
        var rounds = 5
        var seconds = 2.0
    }

    /// Runs the benchmark; prints one line per round and a summary, returns the exit status.
    static func run(arguments: [String]) async -> Int32 {
        var options = Options()
        var remaining = arguments[...]
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { return usage("\(flag) needs a value") }
            switch flag {
            case "--fixtures": options.fixtures = value
            case "--rounds": guard let rounds = Int(value), rounds > 0 else { return usage("bad --rounds") }; options.rounds = rounds
            case "--seconds": guard let seconds = Double(value), seconds > 0 else { return usage("bad --seconds") }; options.seconds = seconds
            default: return usage("unknown option \(flag)")
            }
        }
        let names = ["jws_transaction_autorenew_intro_offer_sandbox_gopay.jws", "jws_transaction_autorenew_renewal_sandbox_gopay.jws"]
        let payloads: [String]
        do {
            payloads = try names.map {
                try String(contentsOfFile: "\(options.fixtures)/\($0)", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            }
        } catch {
            return usage("cannot read the fixtures in \(options.fixtures): \(error)")
        }
        let configuration = { (capacity: Int) in
            SignedDataVerifier(bundleID: "Com.VoiceRecording.Telephone", appAppleID: nil, environments: [.sandbox], chainCacheCapacity: capacity)
        }
        let cached = configuration(64), cold = configuration(0)
        let references: [Reference]
        do {
            references = try await payloads.asyncMap { try await Reference($0, verifier: cold) }
        } catch {
            return usage("a fixture does not verify: \(error)")
        }

        var figures: [(cached: Double, bare: Double, cold: Double)] = []
        for round in 1...options.rounds {
            // Each round alternates the three in slices of 50 ms, so that what else the machine does meanwhile
            // slows them alike; a rate is the calls of all its slices over their time.
            var counts = [0, 0, 0], times = [0.0, 0.0, 0.0]
            let slices = max(1, Int(options.seconds / 0.05))
            let operations: [(Int) async -> Bool] = [
                { index in (try? await cached.verifyTransaction(payloads[index % payloads.count])) != nil },
                { index in references[index % references.count].verify() },
                { index in (try? await cold.verifyTransaction(payloads[index % payloads.count])) != nil },
            ]
            for slice in 0..<slices {
                // Cold first (it disturbs the processor's caches most), then cached and bare, in turns first.
                for which in slice % 2 == 0 ? [2, 0, 1] : [2, 1, 0] {
                    let operation = operations[which]
                    guard let (count, time) = await measure(0.05, operation) else {
                        print("signed-bench: a verification failed")
                        return 1
                    }
                    counts[which] += count
                    times[which] += time
                }
            }
            let (cachedRate, bareRate, coldRate) = (Double(counts[0]) / times[0], Double(counts[1]) / times[1], Double(counts[2]) / times[2])
            figures.append((cachedRate, bareRate, coldRate))
            print(String(format: "round=%d cached_per_s=%.0f bare_es256_per_s=%.0f cold_per_s=%.0f cached_ratio=%.3f cold_ratio=%.3f",
                         round, cachedRate, bareRate, coldRate, cachedRate / bareRate, coldRate / bareRate))
        }
        let median = { (values: [Double]) in values.sorted()[values.count / 2] }
        let cachedRatio = median(figures.map { $0.cached / $0.bare }), coldRatio = median(figures.map { $0.cold / $0.bare })
        print(String(format: "median cached_per_s=%.0f bare_es256_per_s=%.0f cold_per_s=%.0f cached_ratio=%.3f cold_ratio=%.3f goal_cached_ratio_0.8=%@",
                     median(figures.map(\.cached)), median(figures.map(\.bare)), median(figures.map(\.cold)), cachedRatio, coldRatio,
                     cachedRatio >= 0.8 ? "met" : "missed"))
        return 0
    }

    /// A fixture's signature checked with swift-crypto alone: the leaf's key, the raw signature and the signed
    /// bytes, decoded once.
    struct Reference: Sendable {
        let key: P256.Signing.PublicKey
        let signature: P256.Signing.ECDSASignature
        let signedBytes: [UInt8]

        init(_ jws: String, verifier: SignedDataVerifier) async throws {
            _ = try await verifier.verifyTransaction(jws)  // the fixture verifies in full before it serves as reference
            let parts = jws.split(separator: ".")
            let header = try JSONSerialization.jsonObject(with: Self.base64URL(parts[0])) as? [String: Any]
            guard let leaf = (header?["x5c"] as? [String])?.first, let der = Data(base64Encoded: leaf) else { throw CocoaError(.coderReadCorrupt) }
            let certificate = try Certificate(derEncoded: Array(der))
            guard let key = P256.Signing.PublicKey(certificate.publicKey) else { throw CocoaError(.coderReadCorrupt) }
            self.key = key
            signature = try P256.Signing.ECDSASignature(rawRepresentation: Self.base64URL(parts[2]))
            signedBytes = Array(jws.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        }

        func verify() -> Bool { key.isValidSignature(signature, for: signedBytes) }

        static func base64URL(_ part: Substring) -> Data {
            let text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            return Data(base64Encoded: text + String(repeating: "=", count: (4 - text.count % 4) % 4)) ?? Data()
        }
    }

    /// Calls `operation` with 0, 1, 2… for about `seconds` (at least once); how many calls in how many seconds,
    /// nil when any call failed.
    static func measure(_ seconds: Double, _ operation: (Int) async -> Bool) async -> (count: Int, seconds: Double)? {
        let clock = ContinuousClock()
        let start = clock.now, deadline = start.advanced(by: .seconds(seconds))
        var count = 0
        repeat {
            guard await operation(count) else { return nil }
            count += 1
        } while clock.now < deadline
        let elapsed = start.duration(to: clock.now)
        return (count, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
    }

    static func usage(_ problem: String) -> Int32 {
        FileHandle.standardError.write(Data("signed-bench: \(problem)\nusage: signed-bench [--fixtures DIR] [--rounds N] [--seconds S]\n".utf8))
        return 2
    }
}

extension Array {
    /// `transform` applied to each element in order, awaiting each.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
