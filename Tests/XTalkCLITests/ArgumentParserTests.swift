import Testing
@testable import XTalkCLI

/// The options of `sendSpec`, read as text: value options with and without a short name, and flags with
/// and without one.
private enum Send {
    static let timeout = OptionSpec.string(
        "timeout", short: "t", value: "SECONDS",
        help: "How long to wait (default 3).")
    static let rssi = OptionSpec.string("rssi", value: "DBM", help: "Minimum signal strength.")
    static let name = OptionSpec.repeatable("name", short: "n", value: "NAME", help: "A device name; repeatable.")
    static let encoding = OptionSpec.choice("encoding", from: ["plain", "xor"], help: "The AT encoding.")
    static let json = OptionSpec.flag("json", help: "One JSON object per line.")
    static let verbose = OptionSpec.flag("verbose", short: "v", help: "Show the AT traffic.")
    /// `--name` read as its last value: the same declaration as `name`, another reading.
    static let lastName = OptionSpec.string("name", short: "n", value: "NAME", help: "A device name; repeatable.")
}

/// The grammar most tests parse against: a required positional and the options of `Send`.
private let sendSpec = CommandSpec(
    name: "send",
    summary: "Send a radio payload.",
    positionals: [PositionalSpec(name: "HEX", help: "The payload as hex.")],
    options: [Send.timeout, Send.rssi, Send.name, Send.encoding, Send.json, Send.verbose]
)

/// The options of `variadic`.
private enum At {
    static let json = OptionSpec.flag("json", help: "JSON.")
    static let verbose = OptionSpec.flag("verbose", short: "v", help: "Verbose.")
}

/// A command whose only positional is variadic and required: one or more words.
private let variadic = CommandSpec(
    name: "at",
    summary: "Run AT commands.",
    positionals: [PositionalSpec(name: "COMMAND", help: "AT commands.", isVariadic: true)],
    options: [At.json, At.verbose]
)

/// Parses against `spec`, failing the test (with the message) on a usage error.
private func parse(_ arguments: [String], _ spec: CommandSpec = sendSpec) -> ParsedArguments? {
    do throws(UsageError) {
        return try ArgumentParser.parse(arguments, for: spec)
    } catch {
        Issue.record("unexpected usage error: \(error.message)")
        return nil
    }
}

/// The usage error `parse` throws, or nil when it accepts the arguments.
private func usageError(_ arguments: [String], _ spec: CommandSpec = sendSpec) -> String? {
    do throws(UsageError) {
        _ = try ArgumentParser.parse(arguments, for: spec)
        return nil
    } catch {
        return error.message
    }
}

/// The command-line parser: grammar, usage errors, typed values and help text.
@Suite("Argument parser", .timeLimit(.minutes(5)))
struct ArgumentParserTests {}

extension ArgumentParserTests {
    @Suite("Options")
    struct Options {
        @Test("--name value and --name=value give the same value")
        func longValueForms() throws {
            #expect(try parse(["--timeout", "5", "AA"])?[Send.timeout] == "5")
            #expect(try parse(["--timeout=5", "AA"])?[Send.timeout] == "5")
            #expect(parse(["--timeout=5", "AA"])?.positionals == ["AA"])
        }

        @Test("the = form splits at the first '=' and allows an empty value")
        func equalsFormEdges() throws {
            #expect(try parse(["--name=a=b", "AA"])?[Send.lastName] == "a=b")
            #expect(try parse(["--name=", "AA"])?[Send.lastName] == "")
        }

        @Test("short flags and short options with a value")
        func shortForms() throws {
            let parsed = parse(["-v", "-t", "7", "AA"])
            #expect(parsed?[Send.verbose] == true)
            #expect(try parsed?[Send.timeout] == "7")
            #expect(parsed?.positionals == ["AA"])
        }

        @Test("options may come before, between and after positionals")
        func optionsAnywhere() {
            let parsed = parse(["--json", "AA", "-v"])
            #expect(parsed?[Send.json] == true)
            #expect(parsed?[Send.verbose] == true)
            #expect(parsed?.positionals == ["AA"])
        }

        @Test("flags that were not given are absent, and value options count as given")
        func absentAndPresent() throws {
            let parsed = try #require(parse(["--rssi", "-40", "AA"]))
            #expect(parsed[Send.json] == false)
            #expect(try parsed[Send.rssi] == "-40")
            #expect(try parsed[Send.timeout] == nil)
            #expect(try parsed[Send.name] == [])
        }

        @Test("a repeated option keeps every value in order; a single-value reading is the last one")
        func repeatedOptions() throws {
            let parsed = parse(["--name", "a", "-n", "b", "--name=c", "AA"])
            #expect(try parsed?[Send.name] == ["a", "b", "c"])
            #expect(try parsed?[Send.lastName] == "c")
        }

        @Test("a repeated flag is simply given, with no values")
        func repeatedFlag() {
            let parsed = parse(["--json", "--json", "AA"])
            #expect(parsed?[Send.json] == true)
            #expect(parsed?.options == ["json": []])
        }

        @Test(
            "an option's value may start with '-'",
            arguments: [
                (["--rssi", "-50", "AA"], Send.rssi, "-50"),
                (["--rssi=-50", "AA"], Send.rssi, "-50"),
                (["-t", "-1", "AA"], Send.timeout, "-1"),
                (["--name", "--json", "AA"], Send.lastName, "--json"),
                (["--name", "-", "AA"], Send.lastName, "-"),
            ])
        func dashValues(arguments: [String], option: OptionSpec<String?>, expected: String) throws {
            let parsed = parse(arguments)
            #expect(try parsed?[option] == expected)
            // The value was consumed as a value, not also read as an option.
            #expect(parsed?[Send.json] == false)
            #expect(parsed?.positionals == ["AA"])
        }

        @Test("a negative number is a positional, not an unknown option")
        func negativePositional() {
            #expect(parse(["-50"])?.positionals == ["-50"])
            #expect(parse(["-0.5"])?.positionals == ["-0.5"])
        }

        @Test("'--' ends the options: everything after it is positional, a second '--' included")
        func doubleDash() {
            let parsed = parse(["--json", "--", "-v", "--timeout", "--", "-h"], variadic)
            #expect(parsed?.positionals == ["-v", "--timeout", "--", "-h"])
            #expect(parsed?[At.verbose] == false)
            #expect(parsed?.isHelpRequested == false)
            #expect(parsed?[At.json] == true)
        }

        @Test("'-' alone and the empty string are positionals")
        func dashAndEmpty() {
            #expect(parse(["-"])?.positionals == ["-"])
            #expect(parse([""])?.positionals == [""])
            #expect(parse(["-", ""], variadic)?.positionals == ["-", ""])
        }
    }
}

extension ArgumentParserTests {
    @Suite("Positionals")
    struct Positionals {
        /// A required argument, then an optional one.
        static let optional = CommandSpec(
            name: "copy",
            summary: "Copy.",
            positionals: [
                PositionalSpec(name: "FROM", help: "Source."),
                PositionalSpec(name: "TO", help: "Destination.", isOptional: true),
            ]
        )

        @Test("a variadic positional collects every remaining argument in order")
        func variadicCollects() {
            #expect(
                parse(["AT", "--json", "AT+VER?", "AT+ID?"], variadic)?.positionals == ["AT", "AT+VER?", "AT+ID?"])
        }

        @Test("a required variadic positional needs at least one argument")
        func variadicRequired() {
            #expect(usageError(["--json"], variadic) == "missing argument <COMMAND>")
        }

        @Test("an optional variadic positional accepts none")
        func optionalVariadic() {
            let spec = CommandSpec(
                name: "x", summary: "X.",
                positionals: [PositionalSpec(name: "FILE", help: "Files.", isVariadic: true, isOptional: true)])
            #expect(parse([], spec)?.positionals == [])
            #expect(parse(["a", "b"], spec)?.positionals == ["a", "b"])
        }

        @Test("an optional positional may be left out, but not exceeded")
        func optionalPositional() {
            #expect(parse(["a"], Self.optional)?.positionals == ["a"])
            #expect(parse(["a", "b"], Self.optional)?.positionals == ["a", "b"])
            #expect(usageError(["a", "b", "c"], Self.optional) == "unexpected argument 'c'")
            #expect(usageError([], Self.optional) == "missing argument <FROM>")
        }

        @Test("a command without positionals rejects the first one")
        func noPositionals() {
            let spec = CommandSpec(name: "scan", summary: "Scan.")
            #expect(parse([], spec)?.positionals == [])
            #expect(usageError(["x", "y"], spec) == "unexpected argument 'x'")
        }
    }
}

extension ArgumentParserTests {
    @Suite("Usage errors name the flag")
    struct Errors {
        @Test(
            "every usage error's exact message",
            arguments: [
                (["AA", "--timeout"], "option --timeout needs a value (SECONDS)"),
                (["AA", "-t"], "option -t needs a value (SECONDS)"),
                (["AA", "--json=1"], "flag --json takes no value"),
                (["AA", "--json="], "flag --json takes no value"),
                (["AA", "-v=1"], "unknown option -v=1"),
                (["AA", "--help=yes"], "flag --help takes no value"),
                (["AA", "--foo"], "unknown option --foo"),
                (["AA", "--foo=3"], "unknown option --foo"),
                (["AA", "-x"], "unknown option -x"),
                (["AA", "-vt"], "unknown option -vt"),
                (["AA", "--jsn"], "unknown option --jsn; did you mean --json?"),
                (["AA", "--JSON"], "unknown option --JSON"),
                (["AA", "--timeot", "5"], "unknown option --timeot; did you mean --timeout?"),
                (["AA", "-json"], "unknown option -json; did you mean --json?"),
                (["AA", "--hlp"], "unknown option --hlp; did you mean --help?"),
                (["AA", "---json"], "unknown option ---json; did you mean --json?"),
                ([], "missing argument <HEX>"),
                (["--json"], "missing argument <HEX>"),
                (["AA", "BB"], "unexpected argument 'BB'"),
                (["AA", "--", "--json"], "unexpected argument '--json'"),
            ])
        func messages(arguments: [String], message: String) {
            #expect(usageError(arguments) == message)
        }

        @Test("the first mistake on the command line is the one reported")
        func firstErrorWins() {
            #expect(usageError(["--bogus", "--json=1"]) == "unknown option --bogus")
            #expect(usageError(["--json=1", "--bogus"]) == "flag --json takes no value")
            // Option mistakes come before positional ones, which are only known at the end.
            #expect(usageError(["AA", "BB", "--bogus"]) == "unknown option --bogus")
        }

        @Test("a UsageError prints as its message")
        func description() {
            #expect("\(UsageError("unknown option --foo"))" == "unknown option --foo")
            #expect(UsageError("a") != UsageError("b"))
        }

        @Test("edit distance: insertions, deletions, substitutions")
        func editDistance() {
            #expect(ArgumentParser.editDistance("json", "json") == 0)
            #expect(ArgumentParser.editDistance("jsn", "json") == 1)
            #expect(ArgumentParser.editDistance("jsoon", "json") == 1)
            #expect(ArgumentParser.editDistance("jsox", "json") == 1)
            #expect(ArgumentParser.editDistance("", "abc") == 3)
            #expect(ArgumentParser.editDistance("kitten", "sitting") == 3)
        }

        @Test("a suggestion needs a close enough name: short names allow one edit only")
        func noFarSuggestion() {
            let spec = CommandSpec(
                name: "x", summary: "X.",
                options: [OptionSpec.string("ip", value: "IP", help: "IP.")])
            #expect(usageError(["--xy"], spec) == "unknown option --xy")
            #expect(usageError(["--ipp", "1"], spec) == "unknown option --ipp; did you mean --ip?")
            #expect(usageError(["--zzzzzz"]) == "unknown option --zzzzzz")
        }
    }
}

extension ArgumentParserTests {
    @Suite("Help")
    struct HelpRequests {
        @Test(
            "-h or --help anywhere requests help, even with positionals missing",
            arguments: [
                ["-h"], ["--help"], ["AA", "-h"], ["--json", "--help", "AA"], ["--timeout", "5", "-h"],
            ])
        func helpAnywhere(arguments: [String]) {
            #expect(parse(arguments)?.isHelpRequested == true)
        }

        @Test("help wins over every other usage error on the line")
        func helpWinsOverErrors() {
            #expect(parse(["--bogus", "--help"])?.isHelpRequested == true)
            #expect(parse(["AA", "BB", "CC", "-h"])?.isHelpRequested == true)
            #expect(parse(["--json=1", "-h"])?.isHelpRequested == true)
            #expect(parse(["-h", "--timeout"])?.isHelpRequested == true)
        }

        @Test("help is not requested by default, nor by a value that reads -h")
        func helpNotRequested() throws {
            #expect(parse(["AA"])?.isHelpRequested == false)
            let parsed = parse(["--name", "-h", "AA"])
            #expect(parsed?.isHelpRequested == false)
            #expect(try parsed?[Send.lastName] == "-h")
        }
    }
}

extension ArgumentParserTests {
    @Suite("Typed values")
    struct Values {
        /// Reads `option` from `words`, parsed for a command that declares only it.
        static func read<Value>(_ words: [String], _ option: OptionSpec<Value>) throws(UsageError) -> Value {
            try ArgumentParser.parse(words, for: CommandSpec(name: "x", summary: "X.", options: [option]))[option]
        }

        static func count(in range: ClosedRange<Int>? = nil) -> OptionSpec<Int?> {
            .int("count", value: "N", in: range, help: "How many.")
        }

        static func timeout(in range: ClosedRange<Double>? = nil) -> OptionSpec<Double?> {
            .double("timeout", value: "SECONDS", in: range, help: "How long.")
        }

        static let encoding = OptionSpec.choice("encoding", from: ["plain", "xor"], help: "The AT encoding.")

        @Test("int reads the last value and checks the range")
        func int() throws {
            #expect(try Self.read(["--count", "1", "--count", "42"], Self.count(in: 1...1000)) == 42)
            #expect(try Self.read(["--count", "-3"], Self.count()) == -3)
            #expect(try Self.read([], Self.count(in: 1...1000)) == nil)
        }

        @Test(
            "bad integers name the option and the expected range",
            arguments: [
                ("x", 1...1000, "invalid value 'x' for --count: expected an integer from 1 to 1000"),
                ("0", 1...1000, "invalid value '0' for --count: expected an integer from 1 to 1000"),
                ("1001", 1...1000, "invalid value '1001' for --count: expected an integer from 1 to 1000"),
                ("1.5", 1...1000, "invalid value '1.5' for --count: expected an integer from 1 to 1000"),
                ("", 1...1000, "invalid value '' for --count: expected an integer from 1 to 1000"),
                ("0", 1...Int.max, "invalid value '0' for --count: expected an integer of at least 1"),
                ("5", Int.min...0, "invalid value '5' for --count: expected an integer of at most 0"),
                (
                    "99999999999999999999", Int.min...Int.max,
                    "invalid value '99999999999999999999' for --count: expected an integer"
                ),
            ])
        func badInt(text: String, range: ClosedRange<Int>, message: String) {
            #expect(throws: UsageError(message)) {
                try Self.read(["--count", text], Self.count(in: range))
            }
        }

        @Test("an integer without a range only has to be an integer")
        func intWithoutRange() {
            #expect(throws: UsageError("invalid value '5s' for --count: expected an integer")) {
                try Self.read(["--count", "5s"], Self.count())
            }
        }

        @Test("double reads decimals and checks the range")
        func double() throws {
            #expect(try Self.read(["--timeout", "0.25"], Self.timeout(in: 0.05...60)) == 0.25)
            #expect(try Self.read(["--timeout", "2"], Self.timeout()) == 2)
            #expect(try Self.read(["--timeout", "1e1"], Self.timeout()) == 10)
            #expect(try Self.read(["--rssi", "-50"], OptionSpec.double("rssi", value: "DBM", help: "Signal.")) == -50)
            #expect(try Self.read([], Self.timeout()) == nil)
        }

        @Test(
            "bad numbers name the option and the expected range",
            arguments: [
                ("abc", "invalid value 'abc' for --timeout: expected a number from 0.05 to 60"),
                ("0.01", "invalid value '0.01' for --timeout: expected a number from 0.05 to 60"),
                ("61", "invalid value '61' for --timeout: expected a number from 0.05 to 60"),
                ("nan", "invalid value 'nan' for --timeout: expected a number from 0.05 to 60"),
                ("inf", "invalid value 'inf' for --timeout: expected a number from 0.05 to 60"),
                ("0x10", "invalid value '0x10' for --timeout: expected a number from 0.05 to 60"),
                ("", "invalid value '' for --timeout: expected a number from 0.05 to 60"),
            ])
        func badDouble(text: String, message: String) {
            #expect(throws: UsageError(message)) {
                try Self.read(["--timeout", text], Self.timeout(in: 0.05...60))
            }
        }

        @Test("non-finite numbers are rejected even without a range")
        func doubleWithoutRange() {
            #expect(throws: UsageError("invalid value '1e999' for --timeout: expected a number")) {
                try Self.read(["--timeout", "1e999"], Self.timeout())
            }
        }

        @Test("choice accepts exactly the allowed words")
        func choice() throws {
            #expect(try Self.read(["--encoding", "xor"], Self.encoding) == "xor")
            #expect(try Self.read([], Self.encoding) == nil)
            #expect(throws: UsageError("invalid value 'XOR' for --encoding: expected one of plain, xor")) {
                try Self.read(["--encoding", "XOR"], Self.encoding)
            }
        }

        @Test("a custom reading keeps the one message shape")
        func parsed() throws {
            let seed = OptionSpec.parsed("seed", value: "SEED", help: "The seed.", expected: "an unsigned integer") {
                UInt64($0)
            }
            #expect(try Self.read(["--seed", "18446744073709551615"], seed) == UInt64.max)
            #expect(throws: UsageError("invalid value '-1' for --seed: expected an unsigned integer")) {
                try Self.read(["--seed", "-1"], seed)
            }
        }

        @Test("typed values come from the parsed command line; one declaration may be read as several types")
        func endToEnd() throws {
            let parsed = try ArgumentParser.parse(["-t", "2.5", "--encoding=plain", "AA"], for: sendSpec)
            let declaration = Send.timeout.declaration
            let asDouble = OptionSpec.double(
                "timeout", short: declaration.short, value: "SECONDS", in: 0...10,
                help: declaration.help)
            let asInt = OptionSpec.int("timeout", short: declaration.short, value: "SECONDS", help: declaration.help)
            #expect(try parsed[asDouble] == 2.5)
            #expect(try parsed[Send.encoding] == "plain")
            #expect(throws: UsageError("invalid value '2.5' for --timeout: expected an integer")) {
                try parsed[asInt]
            }
        }

        @Test("only declared options can be read; declares(_:) tells which are")
        func declared() throws {
            let parsed = try ArgumentParser.parse(["AA"], for: sendSpec)
            #expect(parsed.declares(Send.json))
            #expect(!parsed.declares(At.json), "the same name with another help is another option")
            #expect(!parsed.declares(Self.count()))
            #expect(parsed.declares(Self.encoding), "the same declaration, wherever it is written")
        }

        @Test("reading an option the command does not declare stops the program")
        func undeclaredReadTraps() async {
            await #expect(processExitsWith: .failure) {
                let parsed = try ArgumentParser.parse(["AA", "--json"], for: sendSpec)
                _ = parsed[At.json]
            }
        }
    }
}

extension ArgumentParserTests {
    @Suite("Help text")
    struct HelpText {
        static let scan = CommandSpec(
            name: "scan",
            summary: "Scan for xTalk devices and list them with their signal strength.",
            positionals: [PositionalSpec(name: "HEX", help: "The payload as hex.")],
            options: [
                OptionSpec.double("timeout", short: "t", value: "SECONDS", help: "How long to scan (default 3)."),
                OptionSpec.flag("json", help: "One JSON object per line."),
            ],
            discussion: """
                EXIT CODES:
                  0  ok
                  3  no device found
                """
        )

        @Test("the whole layout: usage, summary, arguments, options with -h, discussion verbatim")
        func layout() {
            let expected = """
                USAGE: xtalk scan [--timeout SECONDS] [--json] <HEX>

                Scan for xTalk devices and list them with their signal strength.

                ARGUMENTS:
                  <HEX>                   The payload as hex.

                OPTIONS:
                  -t, --timeout SECONDS   How long to scan (default 3).
                  --json                  One JSON object per line.
                  -h, --help              Show help for this command.

                EXIT CODES:
                  0  ok
                  3  no device found
                """
            #expect(ArgumentParser.help(for: Self.scan, commandPath: "xtalk scan") == expected)
        }

        @Test("help lists every option of a command and its usage line")
        func everyOption() {
            let help = ArgumentParser.help(for: sendSpec, commandPath: "xtalk send")
            #expect(
                help.hasPrefix(
                    """
                    USAGE: xtalk send [--timeout SECONDS] [--rssi DBM] [--name NAME]
                                      [--encoding plain|xor] [--json] [--verbose] <HEX>

                    Send a radio payload.

                    """))
            for option in sendSpec.options {
                #expect(help.contains("--\(option.name)"), "missing --\(option.name)")
                #expect(help.contains(option.help), "missing the help of --\(option.name)")
            }
            #expect(help.contains("  -n, --name NAME "))
            #expect(help.contains("  -h, --help "))
            #expect(help.contains("ARGUMENTS:\n  <HEX> "))
        }

        @Test("help wraps at 80 columns and keeps every word")
        func wrapping() {
            let help = ArgumentParser.help(for: sendSpec, commandPath: "xtalk send")
            for line in help.split(separator: "\n") {
                #expect(line.count <= 80, "too long: \(line)")
            }
        }

        @Test("positional forms in the usage line, and no ARGUMENTS section without positionals")
        func positionalForms() {
            let spec = CommandSpec(
                name: "x", summary: "X.",
                positionals: [
                    PositionalSpec(name: "A", help: "A."),
                    PositionalSpec(name: "B", help: "B.", isOptional: true),
                    PositionalSpec(name: "C", help: "C.", isVariadic: true, isOptional: true),
                ])
            #expect(
                ArgumentParser.help(for: spec, commandPath: "xtalk x").hasPrefix("USAGE: xtalk x <A> [<B>] [<C> ...]\n")
            )
            #expect(
                ArgumentParser.help(for: variadic, commandPath: "xtalk at").hasPrefix(
                    "USAGE: xtalk at [--json] [--verbose] <COMMAND> ...\n"))
            let bare = ArgumentParser.help(for: CommandSpec(name: "y", summary: "Y."), commandPath: "xtalk y")
            #expect(bare == "USAGE: xtalk y\n\nY.\n\nOPTIONS:\n  -h, --help              Show help for this command.")
        }

        @Test("a label too long for the column puts its help on the next line, and long help wraps under the column")
        func longLabelAndHelp() {
            let spec = CommandSpec(
                name: "x", summary: "X.",
                options: [
                    OptionSpec.choice(
                        "firmware-encoding", from: ["plain", "xor"],
                        help: "Simulator: the firmware's encoding."),
                    OptionSpec.choice(
                        "backend", from: ["simulator", "platform"],
                        help: String(repeating: "word ", count: 20)),
                ])
            let help = ArgumentParser.help(for: spec, commandPath: "xtalk x")
            #expect(
                help.contains(
                    "\n  --firmware-encoding plain|xor\n                          Simulator: the firmware's encoding.\n"
                ))
            #expect(help.contains("\n  --backend simulator|platform\n                          word word"))
            let wrapped = help.split(separator: "\n").filter {
                $0.hasPrefix(String(repeating: " ", count: 26) + "word")
            }
            #expect(wrapped.count == 2)
        }
    }
}
