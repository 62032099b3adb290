//! Prometheus' standard process metrics, as its client libraries export them (`process_*`),
//! read from `/proc` at each scrape, and `floodgate_build_info`. Open file descriptors against
//! their limit matter most on a gateway: every waiting client holds one.

use std::fmt::Write;

/// The process metrics and the build's, as Prometheus text; the `process_*` lines are left out
/// where there is no `/proc` to read them from.
pub fn render() -> String {
    let mut text = String::new();
    if let Some(stat) = Stat::read() {
        let tick = clock_ticks_per_second();
        family(
            &mut text,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (stat.utime + stat.stime) as f64 / tick,
        );
        family(
            &mut text,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            (stat.rss_pages * 4096) as f64,
        );
        family(
            &mut text,
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            stat.vsize as f64,
        );
        family(
            &mut text,
            "process_threads",
            "gauge",
            "Number of OS threads in the process.",
            stat.threads as f64,
        );
        if let Some(boot) = boot_time() {
            family(
                &mut text,
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                boot as f64 + stat.start_ticks as f64 / tick,
            );
        }
    }
    if let Some(open) = open_fds() {
        family(
            &mut text,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open as f64,
        );
    }
    if let Some(max) = max_fds() {
        family(
            &mut text,
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max as f64,
        );
    }
    let _ = writeln!(
        text,
        "# HELP floodgate_build_info The release this process runs (its version in a label); always 1.\n\
         # TYPE floodgate_build_info gauge\n\
         floodgate_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    text
}

fn family(text: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    let _ = writeln!(
        text,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// What `/proc/self/stat` says of this process.
struct Stat {
    utime: u64,
    stime: u64,
    threads: u64,
    start_ticks: u64,
    vsize: u64,
    rss_pages: u64,
}

impl Stat {
    fn read() -> Option<Stat> {
        Self::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    /// The fields after the command's name (which may hold spaces and parentheses): the
    /// process state is field 3 of proc(5), so field n is `fields[n - 3]`.
    fn parse(stat: &str) -> Option<Stat> {
        let fields: Vec<&str> = stat
            .get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            threads: field(20)?,
            start_ticks: field(22)?,
            vsize: field(23)?,
            rss_pages: field(24)?,
        })
    }
}

/// Clock ticks a second, the unit of `/proc`'s times: Linux's USER_HZ, which its ABI fixes at
/// 100 whatever the kernel's own tick (what `sysconf(_SC_CLK_TCK)` answers).
fn clock_ticks_per_second() -> f64 {
    100.0
}

/// When the machine booted (`btime` of `/proc/stat`), in seconds since the epoch.
fn boot_time() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// The soft limit of open files (what the process may open now; each binary raises it to the
/// hard limit at start).
fn max_fds() -> Option<u64> {
    rlimit::Resource::NOFILE.get().ok().map(|(soft, _)| soft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (floodgate (gw) 1) S 1 4242 4242 0 -1 4194560 5000 0 0 0 \
                    250 75 0 0 20 0 17 0 123456 987654321 2048 18446744073709551615";
        let stat = Stat::parse(line).expect("parses");
        assert_eq!((stat.utime, stat.stime), (250, 75));
        assert_eq!(stat.threads, 17);
        assert_eq!(stat.start_ticks, 123456);
        assert_eq!(stat.vsize, 987654321);
        assert_eq!(stat.rss_pages, 2048);
        assert!(Stat::parse("garbage").is_none());
    }

    #[test]
    fn this_process_is_measured() {
        // Some CPU time, once there is a tick of it to count.
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(spin.elapsed());
        }
        let text = render();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
            "process_threads",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .parse()
                .unwrap();
            assert!(value > 0.0, "{name} is {value}");
        }
        assert!(text.contains("floodgate_build_info{version=\""), "{text}");
    }
}
