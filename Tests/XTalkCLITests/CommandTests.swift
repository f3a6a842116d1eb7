import Foundation
import Testing
@testable import XTalkCLI

@Suite("xtalk commands, in-process on the simulator in virtual time", .timeLimit(.minutes(5)))
@MainActor
struct CommandTests {
    @Test("xtalk --help lists every command and the exit codes")
    func topLevelHelp() async {
        for arguments in [[], ["--help"], ["-h"], ["help"]] {
            let result = await xtalk(arguments)
            #expect(result.code == 0)
            for command in [
                "demo", "scan", "connect", "info", "auth", "at", "send", "listen", "ping", "shell", "bench", "chaos",
            ] {
                #expect(result.stdout.contains("  " + command), "\(command) is listed")
            }
            #expect(result.stdout.contains("EXIT CODES:"))
            for code in ["0 ", "2 ", "3 ", "4 ", "5 ", "6 ", "130"] { #expect(result.stdout.contains("  " + code)) }
        }
    }

    @Test(
        "every command has its own --help",
        arguments: ["demo", "scan", "connect", "info", "auth", "at", "send", "listen", "ping", "shell"])
    func commandHelp(_ command: String) async {
        let result = await xtalk([command, "--help"])
        #expect(result.code == 0)
        #expect(result.stdout.contains("USAGE: xtalk \(command)"))
        #expect(result.stdout.contains("--json"))
        #expect(result.stdout.contains("--firmware-encoding"))
        #expect(await xtalk(["help", command]).stdout == result.stdout)
    }

    @Test(
        "usage errors exit 2 and name the problem",
        arguments: [
            (["frobnicate"], "unknown command 'frobnicate'"),
            (["scan", "--bogus"], "unknown option --bogus"),
            (["scan", "--timeout"], "--timeout"),
            (["scan", "--timeout", "soon"], "--timeout"),
            (["auth", "--mtu", "9"], "--mtu"),
            (["auth", "--firmware-encoding", "rot13"], "--firmware-encoding"),
            (["at"], "COMMAND"),
            (["info", "--address", "zz"], "invalid value 'ZZ' for --address"),
            (["bench", "--only", ""], "invalid value '' for --only"),
            (["demo", "--disconnect-after", "1"], "unknown option --disconnect-after"),
            (["at", ""], "<COMMAND> 1: invalid AT command: the text is empty"),
            (["at", "AT+VER?", "AT+VER?\nAT+FREQ?"], "<COMMAND> 2: invalid AT command: LF at byte 7"),
            (["at", "AT+名字"], "<COMMAND> 1: invalid AT command: byte 3 (0xE5) is not printable ASCII"),
            (["send"], "HEX"),
            (["send", "ABC"], "<HEX>"),
            (["send", "zz"], "<HEX>"),
            (["send", ""], "<HEX>"),
            (["send", "+1-0"], "<HEX>"),
            (["send", String(repeating: "00", count: 241)], "241 bytes"),
            (["ping", "--count", "0"], "--count"),
            (["at", "AT", "--encoding", "ebcdic"], "--encoding"),
            (["scan", "--json=yes"], "--json"),
        ])
    func usageErrors(_ arguments: [String], _ fragment: String) async {
        let result = await xtalk(arguments)
        #expect(result.code == 2, "\(arguments)")
        #expect(result.stderr.contains(fragment), "\(result.stderr)")
        #expect(result.err.count == 1, "one sentence")
    }

    @Test("scan lists the simulated devices, human and JSON")
    func scan() async {
        let human = await xtalk(["scan", "--timeout", "1"])
        #expect(human.code == 0)
        #expect(
            human.out.contains { $0.hasPrefix("xTalk-0001") && $0.contains("C0:FF:EE:00:00:01") && $0.hasSuffix("dBm") }
        )
        #expect(human.out.last == "3 devices")
        #expect(human.elapsed >= .seconds(1))
        let json = await xtalk(["scan", "--timeout", "1", "--json"])
        let devices = json.records(ofType: "device")
        #expect(devices.count == 3)
        #expect(Set(devices.compactMap { $0["name"] as? String }) == ["xTalk-0001", "xTalk-0002", "xTalk-0003"])
        #expect(devices.allSatisfy { $0["rssi"] is Int && $0["address"] is String && $0["id"] is String })
        #expect(json.records(ofType: "summary").first?["devices"] as? Int == 3)
        #expect(json.out.first?.hasPrefix("{\"type\":\"device\",\"id\":") == true, "stable field order")
    }

    @Test("scan ended by Ctrl-C is a normal end")
    func scanInterrupted() async {
        let result = await xtalk(["scan", "--timeout", "60"], cancelAfter: .seconds(1))
        #expect(result.code == 0)
        #expect(result.out.last == "3 devices")
    }

    @Test("info reads battery and versions")
    func info() async {
        let human = await xtalk(["info"])
        #expect(human.code == 0)
        #expect(human.stdout.contains("battery       87"))
        #expect(human.stdout.contains("BLE firmware  1.4.2"))
        #expect(human.stdout.contains("hardware      XT-R2"))
        let json = await xtalk(["info", "--json", "--name", "xTalk-0002"])
        let record = json.records(ofType: "info").first
        #expect(record?["device"] as? String == "xTalk-0002")
        #expect(record?["battery"] as? Int == 87)
        #expect(record?["ble_firmware"] as? String == "1.4.2")
    }

    @Test("auth shows the verified identity; encodings and policies")
    func auth() async {
        let human = await xtalk(["auth"])
        #expect(human.code == 0)
        #expect(human.stdout.contains("did:xtalk:B5803039"))
        #expect(human.stdout.contains("challenge verified (development anchor)"))
        let json = await xtalk([
            "auth", "--json", "--firmware-encoding", "plain", "--no-challenge", "--address", "C0:FF:EE:00:00:03",
        ])
        let identity = json.records(ofType: "identity").first
        #expect(identity?["encoding"] as? String == "plain")
        #expect(identity?["challenge"] as? Bool == false)
        #expect(identity?["anchor"] is NSNull, "no challenge, no anchor")
        #expect(identity?["serial"] as? String == "XT2648020001")
        #expect(identity?["source"] as? String == "efuse")
        let always = await xtalk(["auth", "--json", "--no-challenge", "--always-challenge"])
        #expect(always.records(ofType: "identity").first?["challenge"] as? Bool == true)
        #expect(always.records(ofType: "identity").first?["anchor"] as? String == "development")
    }

    @Test("an untrusted key fails authentication with exit 6 and names the error")
    func authFailure() async {
        let result = await xtalk(["auth", "--untrusted-key"])
        #expect(result.code == 6)
        #expect(result.stderr.contains("XTalkDeviceAuthError.signatureVerificationFailed"))
    }

    @Test("at runs commands in order and prints their lines; a refused one ends the run with exit 1")
    func at() async {
        let human = await xtalk(["at", "AT+VER?", "AT+PING=hi"])
        #expect(human.code == 0)
        #expect(human.out == ["> AT+VER?\n+VER:2.1.0\nOK", "> AT+PING=hi\n+PING:hi\nOK"])
        // A script must be able to tell a refused command; the commands after it are not sent.
        let refused = await xtalk(["at", "AT+VER?", "AT+FREQ=1", "AT+PING=hi"])
        #expect(refused.code == 1)
        #expect(refused.out == ["> AT+VER?\n+VER:2.1.0\nOK", "> AT+FREQ=1\nERROR"])
        #expect(refused.stderr.contains("AT+FREQ=1: the device answered ERROR"), "\(refused.stderr)")
        let json = await xtalk(["at", "AT+VER?", "--json", "--encoding", "xor"])
        #expect(json.out == ["{\"type\":\"response\",\"command\":\"AT+VER?\",\"lines\":[\"+VER:2.1.0\",\"OK\"]}"])
    }

    @Test("a device that does not answer gives exit 5")
    func timeout() async {
        let result = await xtalk([
            "at", "AT+VER?", "--encoding", "xor", "--firmware-encoding", "plain", "--timeout", "500",
        ])
        #expect(result.code == 5)
        #expect(result.stderr.contains("XTalkBleError.timeout"))
        #expect(result.stderr.contains("--encoding xor was given: does the device speak plain?"), "\(result.stderr)")
        // listen: the frames that do not decode are said once, with the same hint.
        let listen = await xtalk(
            ["listen", "--encoding", "plain", "--traffic", "20"], cancelAfter: .seconds(10))
        #expect(listen.code == 0)
        #expect(
            listen.err.filter { $0.contains("received data that is not text in this encoding") }.count == 1,
            "\(listen.err)")
        #expect(listen.stderr.contains("does the device speak xor?"))
    }

    @Test("bad AT text is a usage error with the SDK's reason, found before any scan")
    func badAtText() async {
        let result = await xtalk(["at", "AT\rX"])
        #expect(result.code == 2)
        #expect(result.stderr.contains("CR at byte 2"))
        #expect(result.elapsed == .zero, "no scan, no connection")
    }

    @Test("send hex and text, waiting for +SENDFIN")
    func send() async {
        let hex = await xtalk(["send", "48656c6c6f"])
        #expect(hex.code == 0)
        #expect(hex.stdout.hasPrefix("sent 5 bytes (48656C6C6F): +SENDFIN:OK after "))
        let text = await xtalk(["send", "--text", "hi", "--json"])
        let sent = text.records(ofType: "sent").first
        #expect(sent?["bytes"] as? Int == 2)
        #expect(sent?["data"] as? String == "6869")
        #expect((sent?["ms"] as? Double ?? 0) > 0)
    }

    /// `scan --name`/`--address` that finds nothing is exit 3, as `connect`
    /// is (scripts gate on it); an unfiltered empty scan is still a listing.
    @Test("scan asked for a device that is not there exits 3")
    func scanFindsNothingAskedFor() async {
        let none = await xtalk(["scan", "-t", "0.5", "--name", "nope"])
        #expect(none.code == 3, "\(none.stderr)")
        #expect(none.stderr.contains("no xTalk device named 'nope' was found"), "\(none.stderr)")
        #expect(none.out.last == "0 devices")
        let found = await xtalk(["scan", "-t", "0.5", "--name", "xTalk-0001"])
        #expect(found.code == 0)
    }

    /// The documented range is 0–200 frames a second: a rate too small to
    /// fit in milliseconds is one frame a day, not a crash.
    @Test("a tiny --traffic rate is accepted without a crash", arguments: ["1e-300", "0.00000000000000001"])
    func tinyTraffic(_ rate: String) async {
        let result = await xtalk(["scan", "-t", "0.3", "--traffic", rate])
        #expect(result.code == 0, "\(result.stderr)")
    }

    @Test("help for a command that does not exist is a usage error")
    func helpForNoSuchCommand() async {
        let result = await xtalk(["help", "nope"])
        #expect(result.code == 2)
        #expect(result.stderr.contains("unknown command 'nope'"))
        #expect(await xtalk(["help", "scan"]).code == 0)
    }

    @Test("connect shows how long the device took to be ready; --hold keeps the link until Ctrl-C or its loss")
    func connect() async {
        let human = await xtalk(["connect", "--latency", "30"])
        #expect(human.code == 0)
        #expect(human.out.last?.hasPrefix("connected to xTalk-0001 (C0:FF:EE:00:00:01, ") == true, "\(human.out)")
        let json = await xtalk(["connect", "--json", "--scan-timeout", "4"])
        let record = json.records(ofType: "connected").first
        #expect(record?["name"] as? String == "xTalk-0001")
        // From the connect, not the 4 s scan window before it.
        #expect((record?["ready_ms"] as? Double ?? 0) > 0)
        #expect((record?["ready_ms"] as? Double ?? 4_000) < 1_000, "\(record ?? [:])")
        let held = await xtalk(["connect", "--hold"], cancelAfter: .seconds(3))
        #expect(held.code == 0)
        #expect(held.out.contains("holding the link; Ctrl-C disconnects"))
        let early = await xtalk(["connect", "--name", "nope", "--scan-timeout", "5"], cancelAfter: .seconds(1))
        #expect(early.code == 130, "Ctrl-C before the device is ready is no success")
        let lost = await xtalk(["connect", "--hold", "--disconnect-after", "1"])
        #expect(lost.code == 4)
        #expect(lost.stderr.contains("link was lost"))
    }

    /// The link lost while the values are read: a failure (exit 4), not a
    /// device whose values are "unavailable".
    @Test("info with the link lost while reading fails with exit 4")
    func infoLinkLost() async {
        let result = await xtalk(["info", "--disconnect-after", "0.01"])
        #expect(result.code == 4)
        #expect(result.stderr.contains("the link was lost"), "\(result.stderr)")
        #expect(!result.out.contains { $0.contains("unavailable") })
    }

    /// The options every device command lists select the device in scan and demo too.
    @Test("scan and demo honour --name, --address and --scan-timeout")
    func scanAndDemoSelection() async {
        let named = await xtalk(["scan", "--name", "xTalk-0002", "-t", "1"])
        #expect(named.code == 0)
        #expect(
            named.out.count == 2 && named.out[0].hasPrefix("xTalk-0002 ") && named.out[1] == "1 device", "\(named.out)")
        let byAddress = await xtalk(["scan", "--address", "c0:ff:ee:00:00:03", "-t", "1"])
        #expect(byAddress.out.first?.hasPrefix("xTalk-0003 ") == true && byAddress.out.last == "1 device")
        let window = await xtalk(["scan", "--scan-timeout", "0.5"])
        #expect(window.elapsed < .seconds(1), "--scan-timeout sets the window without -t")
        let demo = await xtalk(["demo", "--name", "xTalk-0002"])
        #expect(demo.code == 0)
        #expect(demo.out.contains { $0.contains("xTalk-0002 (C0:FF:EE:00:00:02): connected, atReady") }, "\(demo.out)")
        let nobody = await xtalk(["demo", "--name", "nope"])
        #expect(nobody.code == 3)
        #expect(nobody.stderr.contains("no xTalk device named 'nope' was found"))
        let both = await xtalk(["info", "--name", "xTalk-0002", "--address", "C0:FF:EE:00:00:03"])
        #expect(both.stderr.contains("named 'xTalk-0002' with address C0:FF:EE:00:00:03"), "\(both.stderr)")
    }

    /// A piped batch ("init", then "enumerate") ends its input at once: the
    /// requests already made are answered first (the enumerate's scan used to
    /// be cut with 720 "the host's input ended").
    @Test("bridge --stdio answers a piped batch before it ends")
    func bridgeBatch() async throws {
        let result = await xtalk(
            ["bridge", "--stdio"],
            input: [#"{"id":1,"method":"init"}"#, #"{"id":3,"method":"enumerate"}"#, #"{"id":4,"method":"version"}"#])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.out.count == 3, "\(result.out)")
        let enumerate = try #require(result.out.first { $0.hasPrefix(#"{"id":3,"#) })
        #expect(enumerate.contains(#""name":"OneKey Pro""#), "\(enumerate)")
    }

    @Test("--version prints the SDK's version; one ping is one round trip")
    func versionAndWording() async {
        let version = await xtalk(["--version"])
        #expect(version.code == 0)
        #expect(version.out == ["xtalk 1.0.0"])
        let one = await xtalk(["ping", "-n", "1"])
        #expect(one.out.last?.hasPrefix("1 round trip: min ") == true, "\(one.out)")
        let notHex = await xtalk(["send", "zz"])
        #expect(notHex.stderr.contains("expected hex digits (0-9, a-f) in pairs"))
    }

    @Test("listen prints frames with metadata until --count")
    func listen() async {
        let human = await xtalk(["listen", "--count", "3", "--traffic", "10"])
        #expect(human.code == 0)
        let frames = human.out.filter { $0.hasPrefix("frame  16 bytes") }
        #expect(frames.count == 3)
        #expect(frames.allSatisfy { $0.contains("cnt=") && $0.contains("rssi=") && $0.contains("snr=") })
        let json = await xtalk(["listen", "-n", "2", "--json"])
        let records = json.records(ofType: "frame")
        #expect(records.count == 2)
        #expect((records.first?["meta"] as? [String: Any])?["cnt"] as? Int != nil)
    }

    @Test("listen ends normally with Ctrl-C; a link loss is exit 4")
    func listenEnds() async {
        let interrupted = await xtalk(["listen"], cancelAfter: .seconds(3))
        #expect(interrupted.code == 0)
        #expect(!interrupted.out.filter { $0.hasPrefix("frame") }.isEmpty)
        let lost = await xtalk(["listen", "--disconnect-after", "1"])
        #expect(lost.code == 4)
        #expect(lost.stderr.contains("link was lost"))
        // Before it listens (still looking for the device): no success to report.
        let early = await xtalk(["listen", "--name", "nope", "--scan-timeout", "5"], cancelAfter: .seconds(1))
        #expect(early.code == 130, "\(early.stderr)")
    }

    /// The demo's step 4 receives radio frames: without traffic on the
    /// simulator it could only fail, so `--traffic 0` is a usage error.
    @Test("demo --traffic 0 is a usage error, not a failed step 4")
    func demoWithoutTraffic() async {
        let result = await xtalk(["demo", "--traffic", "0"])
        #expect(result.code == 2)
        #expect(result.stderr.contains("--traffic must be above 0"), "\(result.stderr)")
    }

    @Test("Ctrl-C in a command that does not end that way is exit 130, after a clean disconnect")
    func interrupted() async {
        let result = await xtalk(["ping", "-n", "100000"], cancelAfter: .seconds(3))
        #expect(result.code == 130)
        #expect(result.stderr.contains("interrupted") || result.stderr.contains("cancelled"))
        #expect(result.out.contains { $0.hasPrefix("reply from") })
    }

    @Test("ping measures round trips and prints min/median/p99")
    func ping() async {
        let human = await xtalk(["ping", "--count", "5", "--latency", "30"])
        #expect(human.code == 0)
        #expect(human.out.filter { $0.hasPrefix("reply from xTalk-0001: seq=") }.count == 5)
        #expect(human.out.last?.hasPrefix("5 round trips: min ") == true)
        let json = await xtalk(["ping", "-n", "4", "--json"])
        let summary = json.records(ofType: "ping_summary").first
        #expect(summary?["count"] as? Int == 4)
        let minimum = summary?["min_ms"] as? Double ?? 0
        let median = summary?["median_ms"] as? Double ?? 0
        let p99 = summary?["p99_ms"] as? Double ?? 0
        #expect(minimum > 0 && minimum <= median && median <= p99)
    }

    @Test("shell sends lines as commands, with history")
    func shell() async {
        let result = await xtalk(
            ["shell", "--traffic", "0"],
            input: [
                "AT+VER?", "", "AT+PING=one", "!!", "!1", "!9", ":hist", ":history",
                String(repeating: "A", count: StandardInputLines.maximumLineLength + 1), ":quit", "AT+NEVER",
            ])
        #expect(result.code == 0)
        #expect(result.out.contains("the line is longer than 1 MiB: not sent"))
        #expect(result.out.contains { $0.hasPrefix("unknown shell command :hist ") }, "not sent to the device")
        #expect(!result.out.contains("ERROR"))
        #expect(result.out.contains("+VER:2.1.0\nOK"))
        #expect(result.out.filter { $0 == "+PING:one\nOK" }.count == 2)
        #expect(result.out.filter { $0 == "+VER:2.1.0\nOK" }.count == 2)
        #expect(result.out.contains("no command 9"))
        #expect(result.out.contains("4  AT+VER?"))
        #expect(!result.stdout.contains("NEVER"))
        let json = await xtalk(["shell", "--json"], input: ["AT"])
        #expect(json.records(ofType: "response").first?["lines"] as? [String] == ["OK"])
    }

    @Test("shell prints URCs as they arrive")
    func shellURCs() async {
        let result = await xtalk(
            ["shell", "--traffic", "20"], input: ["AT+SEND=00", "AT+PING=a", "AT+PING=b", "AT+PING=c"])
        #expect(result.out.contains { $0.hasPrefix("[urc] frame") })
        #expect(result.out.contains("[urc] +SENDFIN:OK"))
    }

    @Test("device selection: not found is exit 3; the platform backend on Linux is exit 4")
    func selection() async {
        let missing = await xtalk(["auth", "--name", "xTalk-9999"])
        #expect(missing.code == 3)
        #expect(missing.stderr.contains("no xTalk device named 'xTalk-9999'"))
        #if os(Linux)
            let platform = await xtalk(["scan", "--backend", "platform"])
            #expect(platform.code == 4)
            #expect(platform.stderr.contains("XTalkBleError.bluetoothUnavailable"))
        #endif
    }

    @Test("--verbose shows AT traffic on stderr, never the challenge")
    func verbose() async {
        let result = await xtalk(["at", "AT+VER?", "--verbose"])
        #expect(result.code == 0)
        #expect(result.stderr.contains("AT+ID?"))
        #expect(result.stderr.contains("+VER:2.1.0"))
        #expect(!result.stderr.contains("CHAL"))
        #expect(!result.stdout.contains("·"), "diagnostics stay off stdout")
    }

    @Test("simulator knobs: MTU, latency and line noise; the SDK works through the noise")
    func knobs() async {
        let result = await xtalk([
            "ping", "-n", "20", "--mtu", "23", "--latency", "50", "--garbage", "12", "--seed", "3",
            "--verbose",
        ])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.out.last?.hasPrefix("20 round trips") == true)
        let slow = await xtalk(["ping", "-n", "3", "--latency", "100", "--json"])
        let fast = await xtalk(["ping", "-n", "3", "--latency", "10", "--json"])
        let slowMedian = slow.records(ofType: "ping_summary").first?["median_ms"] as? Double ?? 0
        let fastMedian = fast.records(ofType: "ping_summary").first?["median_ms"] as? Double ?? 0
        #expect(slowMedian > fastMedian * 3, "latency shapes round trips: \(slowMedian) vs \(fastMedian)")
    }
}
