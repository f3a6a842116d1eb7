import Dispatch
import Foundation
import XTalkDBus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The socket BlueZ's `AcquireWrite` hands over: each packet written on it is
/// one write without response (BlueZ's doc/org.bluez.GattCharacteristic.rst).
/// A write costs one system call instead of a D-Bus call and its reply.
///
/// Owned by one connection. BlueZ hanging its end up (it does when the link
/// ends, or when it must renegotiate the MTU) is noticed as it happens, not
/// only at the next write. Dropping the object closes the descriptor, which is
/// how BlueZ is told to unlock `WriteValue`: the descriptor object is shared
/// with the dispatch sources' cancel handlers, so it closes only after the
/// last source let go of it (closing under a live source is undefined).
/// Used on the main actor only.
final class BlueZWriteSocket: @unchecked Sendable {
    enum SendOutcome: Equatable {
        case sent
        /// The socket is full: BlueZ has not read the earlier packets yet.
        case full
        /// BlueZ closed its end.
        case hungUp
    }

    private let descriptor: DBusFileDescriptor
    /// Watches for BlueZ's hang-up (BlueZ never writes on this socket).
    private var hangUpSource: (any DispatchSourceRead)?
    /// Watches for room while `waiting`; suspended otherwise.
    private var roomSource: (any DispatchSourceWrite)?
    private var waiting = false
    private let onRoom: @MainActor () -> Void

    /// Owns `descriptor` (made non-blocking). On the main actor: `onRoom` runs
    /// once the socket takes packets again after `.full`; `onHangUp` once, when
    /// BlueZ closed its end (drop the object then).
    init(
        descriptor: DBusFileDescriptor, onRoom: @escaping @MainActor () -> Void,
        onHangUp: @escaping @MainActor () -> Void
    ) {
        self.descriptor = descriptor
        self.onRoom = onRoom
        guard let fd = descriptor.rawValue else { return }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .main)
        source.setEventHandler { [weak self] in
            MainActor.assumeIsolated {
                guard let self, let hangUpSource = self.hangUpSource, let fd = self.descriptor.rawValue else { return }
                var byte: UInt8 = 0
                let count = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                if count > 0 { return }  // nothing to read on a write socket: ignored
                // End of file stays readable: stop watching before reporting (once).
                hangUpSource.cancel()
                self.hangUpSource = nil
                onHangUp()
            }
        }
        source.setCancelHandler { [descriptor] in _ = descriptor }
        hangUpSource = source
        source.resume()
    }

    deinit {
        hangUpSource?.cancel()
        if let roomSource {
            roomSource.cancel()
            if !waiting { roomSource.resume() }  // a suspended source never runs its cancel handler
        }
    }

    /// Writes `packet` as one packet, without blocking.
    func send(_ packet: Data) -> SendOutcome {
        guard let fd = descriptor.rawValue else { return .hungUp }
        while true {
            let written = packet.withUnsafeBytes { raw in systemSend(fd, raw.baseAddress, raw.count) }
            if written >= 0 { return .sent }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, ENOBUFS: return .full
            default: return .hungUp
            }
        }
    }

    /// Calls `onRoom` once the socket has room (or hung up: the next send says which).
    func waitForRoom() {
        guard !waiting, let fd = descriptor.rawValue else { return }
        waiting = true
        if let roomSource {
            roomSource.resume()
            return
        }
        let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: .main)
        source.setEventHandler { [weak self] in
            MainActor.assumeIsolated {
                guard let self, self.waiting else { return }
                self.waiting = false
                self.roomSource?.suspend()
                self.onRoom()
            }
        }
        source.setCancelHandler { [descriptor] in _ = descriptor }
        roomSource = source
        source.resume()
    }
}

private func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
        Glibc.send(fd, bytes, count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
    #else
        Darwin.send(fd, bytes, count, Int32(MSG_DONTWAIT))
    #endif
}
