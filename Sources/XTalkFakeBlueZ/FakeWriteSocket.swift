import Dispatch
import Foundation
import XTalkDBus

#if canImport(Glibc)
    import Glibc
#endif

/// The fake's end of an `AcquireWrite` socket (SOCK_SEQPACKET): every packet
/// the client writes is one write without response. Reading pauses while
/// the radio is behind, so a client meets a full socket (BlueZ's flow
/// control through the fd). Main actor only.
final class FakeWriteSocket: @unchecked Sendable {
    /// The client's end until it is handed over (the fake keeps no copy:
    /// the client closing its own must reach our end as a hang-up).
    private var clientEnd: DBusFileDescriptor?
    private let end: DBusFileDescriptor
    private var source: (any DispatchSourceRead)?
    private var paused = false
    private var closed = false
    /// The inodes of both ends (a descriptor's /proc/self/fd link reads "socket:[inode]").
    let inodes: [UInt64]
    private let onPacket: @MainActor (Data) -> Void
    private let onRelease: @MainActor () -> Void

    /// A pipe, as BlueZ 5.50 made (5.51 made a socket pair): reads with read(2).
    private let isPipe: Bool

    /// `onPacket` gets each packet; `onRelease` runs once when the client
    /// closed its end. `pipe`: BlueZ 5.50's pipe instead of a socket pair
    /// (it opened it with O_DIRECT, packets; send(2) fails on it either way).
    init(
        sendBuffer: Int? = nil, pipe: Bool = false, onPacket: @escaping @MainActor (Data) -> Void,
        onRelease: @escaping @MainActor () -> Void
    ) throws {
        var ends: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let made = pipe ? Self.makePipe(&ends) : socketpair(AF_UNIX, type, 0, &ends) == 0
        guard made else {
            throw DBusError(name: "org.bluez.Error.Failed", message: String(cString: strerror(errno)))
        }
        isPipe = pipe
        self.onPacket = onPacket
        self.onRelease = onRelease
        if var size = sendBuffer.map(Int32.init(clamping:)) {
            setsockopt(ends[1], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        inodes = ends.map { descriptor in
            var status = stat()
            return fstat(descriptor, &status) == 0 ? UInt64(status.st_ino) : 0
        }
        end = DBusFileDescriptor(adopting: ends[0])
        clientEnd = DBusFileDescriptor(adopting: ends[1])
        let source = DispatchSource.makeReadSource(fileDescriptor: ends[0], queue: .main)
        source.setEventHandler { [weak self] in
            MainActor.assumeIsolated { self?.readPackets() }
        }
        source.setCancelHandler { [end] in end.close() }
        self.source = source
        source.resume()
    }

    deinit { hangUp() }

    /// A non-blocking, close-on-exec pipe (pipe2 is not in Swift's Glibc).
    private static func makePipe(_ ends: inout [Int32]) -> Bool {
        guard pipe(&ends) == 0 else { return false }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        return true
    }

    /// The client's end, once, for AcquireWrite's reply.
    func handOver() -> DBusFileDescriptor? {
        defer { clientEnd = nil }
        return clientEnd
    }

    /// Reads what the client wrote so far (before a hang-up: nothing written is dropped by the fake).
    @MainActor
    func drainNow() {
        readPackets(evenIfPaused: true)
    }

    @MainActor
    private func readPackets(evenIfPaused: Bool = false) {
        guard let fd = end.rawValue, !closed else { return }
        var buffer = [UInt8](repeating: 0, count: 1_024)
        while !paused || evenIfPaused, !closed {
            let count = isPipe ? read(fd, &buffer, buffer.count) : recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                onPacket(Data(buffer[0..<count]))
            } else if count < 0, errno == EINTR {
                continue
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                hangUp()  // the client closed its end: the lock is released
                onRelease()
                return
            }
        }
    }

    /// Stops reading until `resume()` (the radio is behind).
    func pause() {
        guard !paused, !closed else { return }
        paused = true
        source?.suspend()
    }

    func resume() {
        guard paused, !closed else { return }
        paused = false
        source?.resume()
    }

    /// Closes our end: the client's next write fails (EPIPE), its poll sees a hang-up.
    func hangUp() {
        guard !closed else { return }
        closed = true
        clientEnd?.close()
        // At once: the descriptor itself closes only after the read source
        // let go of it, and a packet written meanwhile would be lost unread.
        if let fd = end.rawValue, !isPipe { _ = shutdown(fd, Int32(SHUT_RDWR)) }
        if let source {
            source.cancel()
            if paused { source.resume() }
            self.source = nil
        } else {
            end.close()
        }
    }
}
