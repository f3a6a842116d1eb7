import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Measurements the benchmark rows share: CPU time and memory of this process.
enum Measure {
    /// CPU time this process has used so far (user + system).
    static func processCPU() -> Duration {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let micros =
            Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000
            + Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
        return .microseconds(micros)
    }

    /// CPU time of `body`, measured on this thread's clock where there is one.
    static func cpu<T>(_ body: () throws -> T) rethrows -> (T, Duration) {
        let start = threadCPU()
        let value = try body()
        return (value, threadCPU() - start)
    }

    static func threadCPU() -> Duration {
        #if os(Linux)
            var spec = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
            return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
        #else
            return processCPU()
        #endif
    }

    /// Resident memory now, in bytes (Linux: /proc/self/statm; elsewhere the peak).
    static func residentBytes() -> Int {
        #if os(Linux)
            if let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
                let fields = text.split(separator: " ")
                if fields.count > 1, let pages = Int(fields[1]) { return pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
            }
        #endif
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int(usage.ru_maxrss) * 1_024
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
