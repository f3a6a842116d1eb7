import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failed call: the peer's D-Bus error, or the connection's own.
package struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error name, e.g. `org.bluez.Error.InProgress`.
    package let name: String
    package let message: String
    package init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    /// The connection closed before the reply arrived.
    package static func disconnected(_ reason: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.Disconnected", message: reason)
    }

    package var description: String { message.isEmpty ? name : "\(name): \(message)" }
}

/// One connection to a message bus, on the main actor.
///
/// I/O is watch-based: a dispatch read source wakes when the socket has bytes
/// (no polling, no timeout adds latency), a serial queue writes. Everything a
/// caller sees (replies, signals, incoming calls, the close) arrives on the
/// main actor on a later turn, never from inside a call. At most
/// `maximumCallsInFlight` calls wait for replies at once (dbus-daemon allows
/// 128 per connection); further calls wait here, in order.
@MainActor
package final class DBusConnection {
    package typealias ReplyHandler = @MainActor (Result<DBusMessage, DBusError>) -> Void

    package static let maximumCallsInFlight = 64
    /// How long a call waits for its reply (libdbus's default).
    package static let defaultCallTimeout: Duration = .seconds(25)

    /// The bus agreed to pass file descriptors (the `UNIX_FD` type).
    package var passesFileDescriptors: Bool { io.passesFileDescriptors }
    /// Our unique name on the bus (after `Hello`).
    package private(set) var uniqueName = ""
    package private(set) var isClosed = false
    /// Signals (after `addMatch`).
    package var onSignal: (@MainActor (DBusMessage) -> Void)?
    /// Method calls addressed to this connection (answer with `send`).
    package var onMethodCall: (@MainActor (DBusMessage) -> Void)?
    /// The connection closed (by the peer, an I/O error, or `close()`); once.
    package var onClose: (@MainActor (String) -> Void)?

    private let io: SocketIO
    private var nextSerial: UInt32 = 0
    private var pending: [UInt32: (handler: ReplyHandler, deadline: ContinuousClock.Instant, timeout: Duration)] = [:]
    /// One timer for every call's deadline, armed for the earliest: arming a
    /// dispatch timer per call would wake libdispatch's timer thread each time.
    private var deadlineTimer: (any DispatchSourceTimer)?
    private var timerDeadline: ContinuousClock.Instant?
    private var waiting: [(message: DBusMessage, timeout: Duration, handler: ReplyHandler)] = []
    /// Count of calls sent; messages sent (any kind). For tests and benchmarks.
    package private(set) var messagesSent = 0

    private init(io: SocketIO) {
        self.io = io
    }

    /// A connection nobody holds any more closes its socket (the read source
    /// would otherwise keep the socket, and itself, alive for good).
    deinit {
        io.shutDown()
    }

    /// Connects to the first reachable address, authenticates and says Hello.
    /// The completion runs on the main actor on a later turn.
    package static func open(
        _ addresses: [DBusAddress], completion: @escaping @MainActor (Result<DBusConnection, DBusError>) -> Void
    ) {
        DispatchQueue.global().async {
            let result = SocketIO.connectAndAuthenticate(addresses)
            DispatchQueue.main.async {
                MainActor.assumeIsolated {
                    switch result {
                    case .failure(let error): completion(.failure(error))
                    case .success(let (io, leftover)):
                        let connection = DBusConnection(io: io)
                        connection.start(leftover: leftover)
                        connection.call(
                            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                            interface: "org.freedesktop.DBus", member: "Hello"
                        ) { reply in
                            switch reply {
                            case .success(let message):
                                connection.uniqueName = message.body.first?.stringValue ?? ""
                                completion(.success(connection))
                            case .failure(let error):
                                connection.close()
                                completion(.failure(error))
                            }
                        }
                    }
                }
            }
        }
    }

    private func start(leftover: [UInt8]) {
        io.start(leftover: leftover) { [weak self] batch in
            // The read source runs on the main queue: the main actor's executor.
            MainActor.assumeIsolated { self?.deliver(batch) }
        }
    }

    /// Calls a method; `reply` runs once, on a later main-actor turn.
    package func call(
        destination: String?, path: String, interface: String?, member: String, body: [DBusValue] = [],
        timeout: Duration = DBusConnection.defaultCallTimeout, reply: @escaping ReplyHandler
    ) {
        let message = DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: member, body: body)
        guard !isClosed else {
            later { reply(.failure(.disconnected("the bus connection is closed"))) }
            return
        }
        if pending.count >= DBusConnection.maximumCallsInFlight {
            waiting.append((message, timeout, reply))
            return
        }
        dispatch(message, timeout: timeout, reply: reply)
    }

    private func dispatch(_ call: DBusMessage, timeout: Duration, reply: @escaping ReplyHandler) {
        var message = call
        message.serial = takeSerial()
        let deadline = ContinuousClock.now + timeout
        pending[message.serial] = (reply, deadline, timeout)
        // The timer stays armed for an earlier deadline (calls mostly share one timeout).
        if timerDeadline.map({ deadline < $0 }) ?? true { armTimer(for: deadline) }
        write(message)
    }

    private func armTimer(for deadline: ContinuousClock.Instant) {
        timerDeadline = deadline
        let timer: any DispatchSourceTimer
        if let deadlineTimer {
            timer = deadlineTimer
        } else {
            timer = DispatchSource.makeTimerSource(queue: .main)
            timer.setEventHandler { [weak self] in MainActor.assumeIsolated { self?.expireCalls() } }
            timer.activate()
            deadlineTimer = timer
        }
        let (seconds, attoseconds) = max(.zero, deadline - ContinuousClock.now).components
        timer.schedule(
            deadline: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)),
            repeating: .never, leeway: .milliseconds(1))
    }

    /// Fails the calls whose deadline passed; re-arms for the next one.
    private func expireCalls() {
        timerDeadline = nil
        let now = ContinuousClock.now
        let expired = pending.filter { $0.value.deadline <= now }.sorted { $0.key < $1.key }
        for (serial, entry) in expired {
            pending[serial] = nil
            entry.handler(
                .failure(
                    DBusError(name: "org.freedesktop.DBus.Error.NoReply", message: "no reply within \(entry.timeout)")))
        }
        if let next = pending.values.map(\.deadline).min() { armTimer(for: next) }
        if !expired.isEmpty { sendWaiting() }
    }

    /// Sends a message that expects no reply (a signal, a method return, an error).
    package func send(_ message: DBusMessage) {
        guard !isClosed else { return }
        var message = message
        message.serial = takeSerial()
        write(message)
    }

    private func takeSerial() -> UInt32 {
        nextSerial = nextSerial == UInt32.max ? 1 : nextSerial + 1
        return nextSerial
    }

    private func write(_ message: DBusMessage) {
        do {
            let bytes = try message.encoded()
            guard message.fileDescriptors.isEmpty || io.passesFileDescriptors else {
                throw DBusWireError("this bus connection cannot pass file descriptors")
            }
            messagesSent += 1
            io.write(bytes, descriptors: message.fileDescriptors)
        } catch {
            // Our own message cannot be encoded: a programming error in a caller, reported as the call's failure.
            if message.kind == .methodCall, let entry = pending.removeValue(forKey: message.serial) {
                later {
                    entry.handler(
                        .failure(DBusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "\(error)")))
                }
            }
        }
    }

    /// Subscribes to signals matching `rule` (the bus's match rule syntax).
    package func addMatch(_ rule: String, reply: @escaping ReplyHandler = { _ in }) {
        call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "AddMatch", body: [.string(rule)], reply: reply)
    }

    /// Closes the socket; pending calls fail with `Disconnected` on a later turn.
    package func close(reason: String = "closed") {
        guard !isClosed else { return }
        isClosed = true
        io.shutDown()
        let failed = pending.values.map(\.handler) + waiting.map(\.handler)
        deadlineTimer?.cancel()
        deadlineTimer = nil
        pending.removeAll()
        waiting.removeAll()
        let onClose = self.onClose
        self.onClose = nil
        // Handlers often capture their connection's owner: let go of them.
        onSignal = nil
        onMethodCall = nil
        later {
            for handler in failed { handler(.failure(.disconnected(reason))) }
            onClose?(reason)
        }
    }

    private func later(_ work: @escaping @MainActor () -> Void) {
        DispatchQueue.main.async { MainActor.assumeIsolated { work() } }
    }

    private func deliver(_ batch: SocketIO.Batch) {
        guard !isClosed else { return }
        for message in batch.messages {
            if isClosed { return }
            switch message.kind {
            case .methodReturn, .error:
                guard let serial = message.replySerial, let entry = pending.removeValue(forKey: serial) else {
                    continue
                }
                if message.kind == .error {
                    entry.handler(
                        .failure(DBusError(name: message.errorName ?? "unknown", message: message.errorText ?? "")))
                } else {
                    entry.handler(.success(message))
                }
                sendWaiting()
            case .signal:
                onSignal?(message)
            case .methodCall:
                if let onMethodCall {
                    onMethodCall(message)
                } else if !message.noReplyExpected {
                    send(
                        .error(
                            to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                            text: "no object here"))
                }
            }
        }
        if let ending = batch.closeReason { close(reason: ending) }
    }

    private func sendWaiting() {
        while pending.count < DBusConnection.maximumCallsInFlight, !waiting.isEmpty, !isClosed {
            let next = waiting.removeFirst()
            dispatch(next.message, timeout: next.timeout, reply: next.handler)
        }
    }

    /// Calls in flight and waiting (for tests).
    package var callsInFlight: Int { pending.count }
    package var callsWaiting: Int { waiting.count }
}

/// The socket. Reads: a dispatch read source on the main queue (the main
/// actor's executor), so that bytes reach the connection without a thread
/// hop. Writes: straight from the main actor without blocking; whatever the
/// socket does not take at once goes, in order, to a queue that writes it
/// blocking (so a full socket never stalls the main actor or the reads).
/// File descriptors travel as SCM_RIGHTS beside the first byte of their message.
private final class SocketIO: @unchecked Sendable {
    struct Failure: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    struct Batch: Sendable {
        var messages: [DBusMessage] = []
        var closeReason: String?
    }

    /// Bytes to send, and the descriptors that go with the first of them.
    struct Segment {
        var bytes: [UInt8]
        var offset = 0
        var descriptors: [DBusFileDescriptor] = []
    }

    enum SendOutcome { case sent, wouldBlock, failed }

    /// At most this many descriptors arrive with one read (SCM_MAX_FD).
    private static let maximumDescriptorsPerRead = 253

    private let fd: Int32
    /// The bus agreed to pass file descriptors (NEGOTIATE_UNIX_FD).
    let passesFileDescriptors: Bool
    private let writeQueue = DispatchQueue(label: "xtalk.dbus.write")
    /// Confined to the main queue.
    private var framer = DBusMessageFramer()
    private var source: (any DispatchSourceRead)?
    private var readBuffer = [UInt8](repeating: 0, count: 65_536)
    private var controlBuffer = [UInt8](
        repeating: 0, count: SocketIO.controlSpace(descriptors: SocketIO.maximumDescriptorsPerRead))
    /// Descriptors received and not yet handed to their message (in order).
    private var receivedDescriptors: [DBusFileDescriptor] = []
    /// Under `lock`: what the socket did not take yet (the write queue owns
    /// it while `draining`), and whether writing failed or the socket closed.
    private let lock = NSLock()
    private var unsent: [Segment] = []
    private var draining = false
    private var writeFailed = false
    /// Under `lock`: the descriptor is closed (its number may belong to another file now).
    private var fdClosed = false
    private var isShutDown = false

    private init(fd: Int32, passesFileDescriptors: Bool) {
        self.fd = fd
        self.passesFileDescriptors = passesFileDescriptors
    }

    static func connectAndAuthenticate(_ addresses: [DBusAddress]) -> Result<(SocketIO, [UInt8]), DBusError> {
        var reasons: [String] = []
        for address in addresses {
            switch connectSocket(address) {
            case .failure(let failure): reasons.append(failure.reason)
            case .success(let fd):
                switch authenticate(fd) {
                case .success(let (leftover, passesFDs)):
                    return .success((SocketIO(fd: fd, passesFileDescriptors: passesFDs), leftover))
                case .failure(let failure):
                    _ = systemClose(fd)
                    reasons.append(failure.reason)
                }
            }
        }
        if addresses.isEmpty { reasons.append("no usable bus address") }
        return .failure(
            DBusError(name: "org.freedesktop.DBus.Error.NoServer", message: reasons.joined(separator: "; ")))
    }

    private static func connectSocket(_ address: DBusAddress) -> Result<Int32, Failure> {
        #if canImport(Glibc)
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return .failure(Failure("socket(): \(String(cString: strerror(errno)))")) }
        #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        let pathBytes: [UInt8]
        switch address {
        case .unixPath(let path): pathBytes = Array(path.utf8) + [0]
        case .unixAbstract(let name): pathBytes = [0] + Array(name.utf8)
        }
        let capacity = MemoryLayout.size(ofValue: storage.sun_path)
        guard pathBytes.count <= capacity else {
            _ = systemClose(fd)
            return .failure(Failure("the bus socket path \(address.description) is too long"))
        }
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            for (index, byte) in pathBytes.enumerated() { raw[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count)
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            _ = systemClose(fd)
            return .failure(Failure("no bus at \(address.description) (\(reason))"))
        }
        return .success(fd)
    }

    /// The handshake, blocking, bounded by a receive timeout.
    private static func authenticate(_ fd: Int32) -> Result<([UInt8], Bool), Failure> {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var auth = DBusAuthClient(uid: UInt32(getuid()))
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            var output = Segment(bytes: auth.takeOutput())
            guard sendBlocking(fd, &output, bound: .seconds(5)) else {
                return .failure(Failure("the bus closed the connection during authentication"))
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return .failure(Failure("the bus did not answer authentication")) }
            switch auth.receive(buffer[0..<count]) {
            case .waiting: continue
            case .rejected(let reason): return .failure(Failure(reason))
            case .authenticated(let leftover, let passesFDs):
                var begin = Segment(bytes: auth.takeOutput())
                guard sendBlocking(fd, &begin, bound: .seconds(5)) else {
                    return .failure(Failure("the bus closed the connection during authentication"))
                }
                var none = timeval(tv_sec: 0, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
                return .success((leftover, passesFDs))
            }
        }
    }

    // MARK: Sending

    /// Sends what the socket takes now, without blocking: the one primitive
    /// behind every write. The first piece of a segment carries its descriptors
    /// (the kernel holds its own copies from then on; ours close when the
    /// segment and its message are gone).
    private static func sendSome(_ fd: Int32, _ segment: inout Segment) -> SendOutcome {
        while segment.offset < segment.bytes.count {
            let written: Int
            if segment.offset == 0, !segment.descriptors.isEmpty {
                written = sendWithDescriptors(fd, segment)
            } else {
                let offset = segment.offset
                written = segment.bytes.withUnsafeBytes { raw in
                    send(fd, raw.baseAddress! + offset, raw.count - offset, sendFlags)
                }
            }
            if written > 0 {
                segment.offset += written
                segment.descriptors.removeAll()
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return .wouldBlock
            } else {
                return .failed
            }
        }
        return .sent
    }

    /// Sends a whole segment, waiting for room up to `bound` (when given) or
    /// until writing is declared failed.
    private static func sendBlocking(
        _ fd: Int32, _ segment: inout Segment, bound: Duration?, failed: () -> Bool = { false }
    ) -> Bool {
        let deadline = bound.map { ContinuousClock.now + $0 }
        while true {
            switch sendSome(fd, &segment) {
            case .sent: return true
            case .failed: return false
            case .wouldBlock:
                if failed() { return false }
                if let deadline, ContinuousClock.now >= deadline { return false }
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 1_000)
            }
        }
    }

    private static func sendWithDescriptors(_ fd: Int32, _ segment: Segment) -> Int {
        let descriptors = segment.descriptors.compactMap(\.rawValue)
        guard descriptors.count == segment.descriptors.count else {
            errno = EBADF
            return -1
        }
        var control = [UInt8](repeating: 0, count: controlSpace(descriptors: descriptors.count))
        control.withUnsafeMutableBytes { raw in
            var header = cmsghdr()
            header.cmsg_len = numericCast(controlHeaderSize + 4 * descriptors.count)
            header.cmsg_level = SOL_SOCKET
            header.cmsg_type = Int32(SCM_RIGHTS)
            raw.storeBytes(of: header, as: cmsghdr.self)
            for (index, descriptor) in descriptors.enumerated() {
                raw.storeBytes(of: descriptor, toByteOffset: controlHeaderSize + 4 * index, as: Int32.self)
            }
        }
        return segment.bytes.withUnsafeBytes { bytes in
            control.withUnsafeMutableBytes { controlBytes in
                var vector = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress!), iov_len: bytes.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = numericCast(controlBytes.count)
                    return sendmsg(fd, &message, sendFlags)
                }
            }
        }
    }

    /// The control message layout (the CMSG_* macros, which Swift does not import).
    private static let controlAlignment = MemoryLayout<Int>.size
    private static var controlHeaderSize: Int { align(MemoryLayout<cmsghdr>.size) }
    private static func align(_ length: Int) -> Int {
        (length + controlAlignment - 1) & ~(controlAlignment - 1)
    }
    private static func controlSpace(descriptors: Int) -> Int {
        controlHeaderSize + align(4 * descriptors)
    }

    private static var sendFlags: Int32 {
        #if canImport(Glibc)
            Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
        #else
            Int32(MSG_DONTWAIT)
        #endif
    }

    /// Writes `bytes` (and `descriptors`) after everything written before: at
    /// once when the socket takes them, else (the rest) on the write queue.
    func write(_ bytes: [UInt8], descriptors: [DBusFileDescriptor]) {
        lock.lock()
        defer { lock.unlock() }
        guard !writeFailed else { return }
        var segment = Segment(bytes: bytes, descriptors: descriptors)
        if draining || !unsent.isEmpty {
            unsent.append(segment)
            return
        }
        switch SocketIO.sendSome(fd, &segment) {
        case .sent: return
        case .failed: writeFailed = true
        case .wouldBlock:
            unsent = [segment]
            draining = true
            writeQueue.async { [self] in drain() }
        }
    }

    /// On the write queue: writes what the socket did not take, waiting for room.
    private func drain() {
        while true {
            let segments: [Segment]? = lock.withLock {
                if writeFailed || unsent.isEmpty {
                    draining = false
                    return nil
                }
                defer { unsent.removeAll() }
                return unsent
            }
            guard let segments else { return }
            for var segment in segments {
                guard SocketIO.sendBlocking(fd, &segment, bound: nil, failed: { lock.withLock { writeFailed } })
                else {
                    lock.withLock {
                        writeFailed = true
                        draining = false
                        unsent.removeAll()
                    }
                    return
                }
            }
        }
    }

    // MARK: Receiving

    /// Starts reading (on the main queue); `deliver` runs there, once per read.
    func start(leftover: [UInt8], deliver: @escaping @Sendable (Batch) -> Void) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .main)
        source.setEventHandler { [self] in readAvailable(deliver: deliver) }
        // The descriptor closes on the write queue, after every write queued
        // before, and no write runs after it (its number may be reused).
        source.setCancelHandler { [self] in
            lock.withLock { writeFailed = true }
            writeQueue.async { [self] in
                lock.withLock {
                    fdClosed = true
                    unsent.removeAll()
                    _ = SocketIO.systemClose(fd)
                }
            }
        }
        self.source = source
        DispatchQueue.main.async { [self] in
            if !leftover.isEmpty { process(leftover[...], deliver: deliver) }
            source.resume()
        }
    }

    private func readAvailable(deliver: @escaping @Sendable (Batch) -> Void) {
        var truncated = false
        let count = readBuffer.withUnsafeMutableBytes { bytes in
            controlBuffer.withUnsafeMutableBytes { control in
                var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = control.baseAddress
                    message.msg_controllen = numericCast(control.count)
                    let count = recvmsg(fd, &message, SocketIO.receiveFlags)
                    if count > 0, message.msg_controllen > 0 {
                        collectDescriptors(control, length: Int(message.msg_controllen))
                    }
                    truncated = Int32(message.msg_flags) & Int32(MSG_CTRUNC) != 0
                    return count
                }
            }
        }
        if count < 0, errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { return }
        guard count > 0, !truncated else {
            source?.cancel()
            source = nil
            let reason =
                truncated
                ? "the bus passed more file descriptors than one read holds"
                : count == 0 ? "the bus closed the connection" : "reading from the bus failed"
            receivedDescriptors.removeAll()
            deliver(Batch(closeReason: reason))
            return
        }
        process(readBuffer[0..<count], deliver: deliver)
    }

    private static var receiveFlags: Int32 {
        #if canImport(Glibc)
            Int32(MSG_CMSG_CLOEXEC)
        #else
            0
        #endif
    }

    /// Takes ownership of every descriptor in the control messages.
    private func collectDescriptors(_ control: UnsafeMutableRawBufferPointer, length: Int) {
        var offset = 0
        let headerSize = SocketIO.controlHeaderSize
        while offset + headerSize <= min(length, control.count) {
            let header = control.loadUnaligned(fromByteOffset: offset, as: cmsghdr.self)
            let messageLength = Int(header.cmsg_len)
            guard messageLength >= headerSize, offset + messageLength <= control.count else { return }
            if header.cmsg_level == SOL_SOCKET, header.cmsg_type == Int32(SCM_RIGHTS) {
                for index in 0..<(messageLength - headerSize) / 4 {
                    let descriptor = control.loadUnaligned(
                        fromByteOffset: offset + headerSize + 4 * index, as: Int32.self)
                    receivedDescriptors.append(DBusFileDescriptor(adopting: descriptor))
                }
            }
            offset += SocketIO.align(messageLength)
        }
    }

    private func process(_ bytes: ArraySlice<UInt8>, deliver: @escaping @Sendable (Batch) -> Void) {
        do {
            var messages = try framer.append(bytes)
            // A message's descriptors came with its first byte: they are here.
            for index in messages.indices where messages[index].declaredFileDescriptorCount > 0 {
                let count = messages[index].declaredFileDescriptorCount
                guard receivedDescriptors.count >= count else {
                    throw DBusWireError("a message declares \(count) file descriptors that did not come with it")
                }
                messages[index].fileDescriptors = Array(receivedDescriptors.prefix(count))
                receivedDescriptors.removeFirst(count)
            }
            if !messages.isEmpty { deliver(Batch(messages: messages)) }
        } catch {
            source?.cancel()
            source = nil
            receivedDescriptors.removeAll()
            deliver(Batch(closeReason: "\(error)"))
        }
    }

    /// Wakes the read source with end-of-file; it closes the descriptor once.
    func shutDown() {
        let first = lock.withLock {
            defer { isShutDown = true }
            if !isShutDown && !fdClosed { _ = shutdownSocket(fd) }
            writeFailed = true
            return !isShutDown
        }
        guard first else { return }
        DispatchQueue.main.async { [self] in
            if let source {
                source.cancel()
                self.source = nil
            }
        }
    }

    private func shutdownSocket(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
            return Glibc.shutdown(fd, Int32(SHUT_RDWR))
        #else
            return Darwin.shutdown(fd, SHUT_RDWR)
        #endif
    }

    static func systemClose(_ fd: Int32) -> Int32 {
        DBusFileDescriptor.systemClose(fd)
    }
}
