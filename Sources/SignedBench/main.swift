import Foundation

// `signed-bench …`: see `SignedBenchmark`. The measured calls run off the main actor, as in the service.
let status = await Task.detached { await SignedBenchmark.run(arguments: Array(CommandLine.arguments.dropFirst())) }.value
exit(status)
