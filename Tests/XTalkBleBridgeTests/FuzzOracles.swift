// The oracle of the `bridge-router` fuzz target (Fuzz/run compiles this file
// with the bridge's JSON, hex and error sources into one module; the tests
// run it over random and mutated inputs too).

import Foundation

#if canImport(XTalkBleBridge)
    import XTalkBleBridge
#endif

enum BridgeFuzzOracle {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The request parser, strict hex and JSON quoting, on one input:
    /// - a JSON text the parser accepts re-encodes to text that parses to the same value;
    /// - hex decodes exactly when it is non-empty, even-length `[0-9a-fA-F]`, and
    ///   round-trips to its lowercase form; a refusal is the send error (710)
    ///   and never repeats the input;
    /// - any text, quoted as a JSON string, parses back to itself;
    /// - the id read from a request's head (`leadingID`, for requests too long
    ///   to keep) is the object's top-level numeric "id", or nil when it has
    ///   none; from any head of it, that id or nil, never another number.
    static func check(_ input: [UInt8]) throws(Failure) {
        _ = BridgeJSON.leadingID(input)  // any input: an answer, never a trap
        if let value = try? BridgeJSON.parse(input) {
            let encoded = Array(value.encoded.utf8)
            guard let again = try? BridgeJSON.parse(encoded), again == value else {
                throw Failure("re-encoding \(value) gave \(value.encoded), which parses differently")
            }
            var id: Double?
            if case .number(let number)? = value["id"] { id = number }
            guard BridgeJSON.leadingID(encoded) == id else {
                throw Failure("the head's id of \(value.encoded) is not \(id.map(String.init(describing:)) ?? "nil")")
            }
            for cut in 0..<min(encoded.count, 512) {
                let head = BridgeJSON.leadingID(Array(encoded[..<cut]))
                guard head == nil || head == id else {
                    throw Failure("the first \(cut) bytes of \(value.encoded) give the id \(head ?? 0)")
                }
            }
        }
        guard let text = String(validating: input, as: UTF8.self) else { return }
        let isHex = { (byte: UInt8) in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
        }
        let valid = !input.isEmpty && input.count % 2 == 0 && input.allSatisfy(isHex)
        switch BridgeHex.decode(text) {
        case .success(let data):
            guard valid else { throw Failure("accepted \(input.count) bytes that are not strict hex") }
            guard data.count == input.count / 2, BridgeHex.encode(data) == text.lowercased() else {
                throw Failure("hex did not round-trip")
            }
        case .failure(let error):
            guard !valid else { throw Failure("refused strict hex of \(input.count) bytes") }
            guard error.code == .writeCharacteristic else { throw Failure("a refusal with code \(error.code)") }
            // The words are one of three fixed sentences with a number: never the payload.
            let prefix = "send refused before any byte was written: "
            guard error.message.hasPrefix(prefix) else { throw Failure("an unknown refusal: \(error.message)") }
            let reason = error.message.dropFirst(prefix.count)
            let known =
                reason == "the hex is empty" || reason == "the hex has an odd length (\(input.count))"
                || (reason.hasPrefix("the hex has a character that is not a hex digit at offset ")
                    && Int(reason.dropFirst("the hex has a character that is not a hex digit at offset ".count))
                        .map { $0 >= 0 && $0 < input.count } == true)
            guard known else { throw Failure("an unknown refusal: \(error.message)") }
        }
        guard let quoted = try? BridgeJSON.parse(Array(BridgeJSON.quoted(text).utf8)), quoted == .string(text) else {
            throw Failure("quoting did not round-trip")
        }
    }
}
