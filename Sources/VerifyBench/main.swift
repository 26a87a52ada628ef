import Dispatch
import Foundation
import ServiceRuntime

// `verify-bench …`: see `VerifyBenchmark`.
Task.onLoop {
    exit(await VerifyBenchmark.run(arguments: Array(CommandLine.arguments.dropFirst())))
}
dispatchMain()
