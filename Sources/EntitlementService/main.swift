import ServiceRuntime
import Dispatch
import Foundation

let command: Command
do {
    command = try Command.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("entitlement-service: \(error.message)\n\n\(Command.usage)\n".utf8))
    exit(64)
}
Task.onLoop {
    exit(await Commands.run(command))
}
dispatchMain()
