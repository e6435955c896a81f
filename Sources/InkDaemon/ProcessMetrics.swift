import Glibc

/// The Prometheus client libraries' standard `process_*` series, read from the kernel at each
/// scrape: CPU seconds, resident and virtual memory, open and most descriptors, start time.
/// Only `/proc/self` is read (the unit's `ProcSubset=pid` hides the rest of /proc).
final class ProcessMetrics {
    private var cpuSeconds: FractionalCounter?
    private var residentBytes: Gauge?
    private var virtualBytes: Gauge?
    private var openFDs: Gauge?
    private var maxFDs: Gauge?
    private var startTime: Gauge?

    func register(in registry: MetricsRegistry) {
        cpuSeconds = registry.fractionalCounter("process_cpu_seconds_total", help: "User and system CPU time spent, seconds.")
        residentBytes = registry.gauge("process_resident_memory_bytes", help: "Resident memory size, bytes.")
        virtualBytes = registry.gauge("process_virtual_memory_bytes", help: "Virtual memory size, bytes.")
        openFDs = registry.gauge("process_open_fds", help: "Open file descriptors.")
        maxFDs = registry.gauge("process_max_fds", help: "Most open file descriptors allowed (RLIMIT_NOFILE).")
        startTime = registry.gauge("process_start_time_seconds", help: "Start time of the process since the Unix epoch, seconds.")
        startTime?.set(ProcessMetrics.startTimeSeconds() ?? 0)
        sample()
    }

    func sample() {
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            cpuSeconds?.advance(to: ProcessMetrics.seconds(usage.ru_utime) + ProcessMetrics.seconds(usage.ru_stime))
        }
        if let pages = ProcessMetrics.statmPages() {
            let pageBytes = Double(sysconf(Int32(_SC_PAGESIZE)))
            virtualBytes?.set(Double(pages.size) * pageBytes)
            residentBytes?.set(Double(pages.resident) * pageBytes)
        }
        if let count = ProcessMetrics.openDescriptorCount() { openFDs?.set(count) }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs?.set(Double(limit.rlim_cur)) }
    }

    private static func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }

    /// `/proc/self/statm`: total and resident pages.
    private static func statmPages() -> (size: UInt64, resident: UInt64)? {
        guard let text = FileSystem.readText("/proc/self/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count >= 2, let size = UInt64(fields[0]), let resident = UInt64(fields[1]) else { return nil }
        return (size, resident)
    }

    /// Entries of `/proc/self/fd`, less the one this listing opens.
    private static func openDescriptorCount() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let first = withUnsafeBytes(of: entry.pointee.d_name) { $0[0] }
            if first != UInt8(ascii: ".") { count += 1 }
        }
        return count - 1
    }

    /// Field 22 of `/proc/self/stat` (start, clock ticks after boot) turned into Unix time with
    /// the boot-time and real-time clocks (no /proc/stat needed).
    static func startTimeSeconds() -> Double? {
        guard let text = FileSystem.readText("/proc/self/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))
        var boot = timespec()
        var real = timespec()
        clock_gettime(CLOCK_BOOTTIME, &boot)
        clock_gettime(CLOCK_REALTIME, &real)
        let sinceBoot = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9
        let now = Double(real.tv_sec) + Double(real.tv_nsec) / 1e9
        return (now - (sinceBoot - ticks / hertz)).rounded()
    }
}
