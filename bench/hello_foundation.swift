// A static Swift Foundation hello-world: the start-up yardstick of bench/startup.sh (the same
// program as ../shared/bench/hello_foundation.swift).
import Foundation

// Touch Foundation so the library is actually loaded and initialised.
let greeting = String(format: "hello %@", ProcessInfo.processInfo.processName)
FileHandle.standardOutput.write(greeting.data(using: .utf8)!)
FileHandle.standardOutput.write("\n".data(using: .utf8)!)
