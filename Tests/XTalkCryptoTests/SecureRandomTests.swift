import Testing
@testable import XTalkCrypto

@Suite(.timeLimit(.minutes(5))) struct SecureRandomTests {
    @Test func returnsRequestedCountAndFreshBytes() throws {
        let first = try SecureRandom.bytes(count: 16)
        let second = try SecureRandom.bytes(count: 16)
        #expect(first.count == 16)
        #expect(second.count == 16)
        // Two equal 128-bit draws happen with probability 2^-128: equality means a broken generator.
        #expect(first != second)
    }

    @Test func returnsEmptyForZero() throws {
        #expect(try SecureRandom.bytes(count: 0) == [])
    }

    @Test func fillsRequestsLargerThanOneGetentropyCall() throws {
        let bytes = try SecureRandom.bytes(count: 1000)
        #expect(bytes.count == 1000)
        // Each 256-byte chunk is filled separately; an all-zero chunk means one was skipped.
        for start in stride(from: 0, to: 1000, by: 256) {
            #expect(bytes[start..<min(start + 256, 1000)].contains { $0 != 0 })
        }
    }
}
