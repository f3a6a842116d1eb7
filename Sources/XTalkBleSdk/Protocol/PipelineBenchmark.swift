/// The receive pipeline (decode, frame, classify, parse) as the client runs
/// it, for the benchmark: the AT channel state machine fed received bytes in
/// chunks, with a command waiting, exactly as on a connection.
package enum ReceivePipelineBenchmark {
    package struct Result: Sendable {
        package var lines = 0
        package var radioFrames = 0
        package var raw = 0
    }

    /// Feeds `stream` in `chunkSize` chunks through one channel machine and
    /// counts what came out.
    package static func run(_ stream: [UInt8], chunkSize: Int, encoding: XTalkAtEncoding) -> Result {
        var channel = AtChannelStateMachine(encoding: encoding)
        _ = channel.submitCommand(
            "AT+BENCH", timeout: .seconds(3600), mode: .collectUntilTimeout, log: true, owner: nil)
        var result = Result()
        var offset = 0
        let size = max(1, chunkSize)
        stream.withUnsafeBufferPointer { buffer in
            while offset < buffer.count {
                let end = min(buffer.count, offset + size)
                for action in channel.bytesReceived(UnsafeBufferPointer(rebasing: buffer[offset..<end])) {
                    if case .emit(let event) = action {
                        switch event {
                        case .line: result.lines += 1
                        case .radioFrame: result.radioFrames += 1
                        case .raw: result.raw += 1
                        case .crcError, .sendFinished: break
                        }
                    }
                }
                offset = end
            }
        }
        return result
    }
}
