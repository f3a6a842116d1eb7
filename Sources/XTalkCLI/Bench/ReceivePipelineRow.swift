import Foundation
import XTalkBleSdk

/// Row 2: the receive pipeline against the naive way, in one run.
enum ReceivePipelineRow {
    /// A realistic mixed stream, xor-encoded: 80 % `+DI:` lines with full
    /// metadata and 64-byte payloads, 10 % other URCs, 10 % responses.
    static func stream(bytes target: Int) -> (stream: [UInt8], lines: Int, frames: Int) {
        var text: [UInt8] = []
        text.reserveCapacity(target + 512)
        var lines = 0
        var frames = 0
        var counter = 0
        let digits = Array("0123456789ABCDEF".utf8)
        while text.count < target {
            counter += 1
            let line: String
            switch counter % 10 {
            case 8: line = counter % 20 == 8 ? "+CRCERR:cnt=\(counter),len=64,rssi=-101,snr=-3" : "+SENDFIN:OK"
            case 9: line = counter % 20 == 9 ? "+VER:2.1.0" : "OK"
            default:
                var hex: [UInt8] = []
                hex.reserveCapacity(128)
                for index in 0..<64 {
                    let byte = UInt8(truncatingIfNeeded: counter &* 31 &+ index &* 7)
                    hex.append(digits[Int(byte >> 4)])
                    hex.append(digits[Int(byte & 0x0F)])
                }
                line = "+DI:cnt=\(counter),len=64,slot=\(counter % 8),snr=\(counter % 13 - 4),rssi=-\(60 + counter % 50),"
                    + "lsnr=\(counter % 11),lrssi=-\(70 + counter % 30),rsnr=\(counter % 9),rrssi=-\(80 + counter % 20),txp=14,data="
                    + String(decoding: hex, as: UTF8.self)
                frames += 1
            }
            text += Array(line.utf8) + [0x0D, 0x0A]
            lines += 1
        }
        return (text.map { $0 ^ 0x5A }, lines, frames)
    }

    /// How typical app code does it: decode to String, split into lines with
    /// `components(separatedBy:)`, split fields, parse with `Int(_:)` and radix 16.
    static func naive(_ stream: [UInt8], chunkSize: Int) -> (lines: Int, frames: Int) {
        var buffer = ""
        var lines = 0
        var frames = 0
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + chunkSize)
            buffer += String(decoding: stream[offset..<end].map { $0 ^ 0x5A }, as: UTF8.self)
            offset = end
            var parts = buffer.components(separatedBy: "\r\n")
            buffer = parts.removeLast()
            for line in parts where !line.isEmpty {
                lines += 1
                guard line.hasPrefix("+DI:") else { continue }
                var payload: [UInt8] = []
                var fields: [String: Int] = [:]
                for field in line.dropFirst(4).split(separator: ",") {
                    let pair = field.split(separator: "=", maxSplits: 1)
                    guard pair.count == 2 else { continue }
                    if pair[0] == "data" {
                        let hex = Array(pair[1])
                        payload = stride(from: 0, to: hex.count - 1, by: 2).compactMap { UInt8(String(hex[$0...$0 + 1]), radix: 16) }
                    } else {
                        fields[String(pair[0])] = Int(pair[1])
                    }
                }
                if !payload.isEmpty && fields["len"] == payload.count { frames += 1 }
            }
        }
        return (lines, frames)
    }

    struct Outcome {
        let chunk: Int
        let megabytesPerSecond: Double
        let linesPerSecond: Double
        let naiveRatio: Double
        let cpuShareAtPhyLimit: Double
        let correct: Bool
    }

    /// Measures the SDK's pipeline and the naive one on the same stream.
    static func measure(bytes: Int, chunk: Int, repetitions: Int) -> Outcome {
        let (stream, lines, frames) = stream(bytes: bytes)
        // Warm up both, and check they agree with the generator.
        let sdk = ReceivePipelineBenchmark.run(stream, chunkSize: chunk, encoding: .xor)
        let naiveResult = naive(stream, chunkSize: chunk)
        let correct = sdk.lines == lines && sdk.radioFrames == frames && naiveResult.lines == lines && naiveResult.frames == frames
        // The best of several runs: a shared machine only ever adds time.
        var sdkTime = Duration.seconds(3600)
        var naiveTime = Duration.seconds(3600)
        for _ in 0..<max(1, repetitions) {
            sdkTime = min(sdkTime, Measure.cpu { _ = ReceivePipelineBenchmark.run(stream, chunkSize: chunk, encoding: .xor) }.1)
            naiveTime = min(naiveTime, Measure.cpu { _ = naive(stream, chunkSize: chunk) }.1)
        }
        let seconds = Measure.seconds(sdkTime)
        let naiveSeconds = Measure.seconds(naiveTime)
        let bytesPerSecond = Double(stream.count) / seconds
        // BLE 2M PHY: 1.4 Mbit/s of application data at most.
        let phyLimitBytesPerSecond = 1_400_000.0 / 8
        return Outcome(chunk: chunk, megabytesPerSecond: bytesPerSecond / 1e6, linesPerSecond: Double(lines) / seconds,
                       naiveRatio: naiveSeconds / seconds, cpuShareAtPhyLimit: phyLimitBytesPerSecond / bytesPerSecond,
                       correct: correct)
    }
}
