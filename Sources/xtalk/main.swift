import Dispatch
import Foundation
import XTalkCLI

// The executable: the real clock, standard input and output, and Ctrl-C.
// Everything else lives in XTalkCLI, which the tests run in-process.

// Started with standard input closed (`xtalk bridge --stdio <&-`): descriptor 0
// is taken by /dev/null before anything else opens one, or the input reader
// would read whatever the runtime opens next (libdispatch's eventfd).
if fcntl(0, F_GETFD) == -1 { _ = open("/dev/null", O_RDONLY) }

let arguments = Array(CommandLine.arguments.dropFirst())

// A reader of the output that goes away (`xtalk listen | head -1`) makes the
// next write fail with EPIPE instead of killing the tool: the command then
// ends cleanly (its link closed) and the tool exits 141, as SIGPIPE would.
signal(SIGPIPE, SIG_IGN)

// Only the interactive shell and the bridge's JSON-lines host read standard input. At most
// 1,024 lines and 4 MiB wait for the command, and none is ever dropped: a full queue holds the
// reader (and the writer then blocks on the pipe) until the command takes a line.
let inputLines = InputLineQueue()
let input = inputLines.stream
if arguments.first == "shell" || arguments.first == "bridge" {
    Thread.detachNewThread {
        // Not readLine(): see StandardInputLines.
        StandardInputLines.readLines(from: 0) { inputLines.put($0) }
        inputLines.finish()
    }
} else {
    inputLines.finish()
}

// Unbuffered writes, so live output (scan, listen) appears as it happens, also through a pipe.
let streams = StandardStreams()
let context = CommandContext(
    virtualClock: nil, input: input, writeOut: { streams.writeOut($0) }, writeError: { streams.writeError($0) })

let command = Task { @MainActor in await XTalkCLI.run(arguments, context: context) }
// Ctrl-C, SIGTERM and output that cannot be written (a full disk, a reader gone)
// all end the command the same way, cleanly; a failed output then exits 1 (or 141).
// A command that has not ended 10 s after that (it waits on something that does
// not honour cancellation) is not allowed to outlive the signal: the tool says so and exits 130.
let stopGrace: DispatchTimeInterval = .seconds(10)
let endCommand: @Sendable () -> Void = {
    inputLines.finish()
    command.cancel()
    DispatchQueue.global().asyncAfter(deadline: .now() + stopGrace) {
        streams.writeError("xtalk: the command did not stop within 10 s of the interrupt; exiting")
        exit(130)
    }
}
streams.onFailure = endCommand

// Ctrl-C cancels the command, which disconnects cleanly; a second Ctrl-C quits at once,
// even while the main thread is blocked (e.g. writing to a pipe nobody reads).
let interrupt = InterruptHandler(first: endCommand, again: { exit(130) })
// SIGTERM (a service manager, `timeout`, `kill`) ends the command as cleanly:
// links closed, fake-bluez's private bus and its directory removed.
let termination = InterruptHandler(signal: SIGTERM, first: endCommand, again: { exit(143) })
// (A command ended by SIGTERM exits as one ended by Ctrl-C: 130, or 0 for the commands that end that way.)

let code = await command.value
exit(streams.failure == nil ? code : streams.brokenPipe ? 141 : 1)
