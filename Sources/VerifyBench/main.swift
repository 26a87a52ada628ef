import Dispatch
import Foundation
import ServiceRuntime

// `verify-bench …`: see `VerifyBenchmark`.
Task { @Loop in
    exit(await VerifyBenchmark.run(arguments: Array(CommandLine.arguments.dropFirst())))
}
dispatchMain()
