//! Prometheus' standard process metrics, as its client libraries export them (`process_*`),
//! read from `/proc` at each scrape, and `floodgate_build_info`. Open file descriptors against
//! their limit matter most on a gateway: every waiting client holds one.

use std::fmt::Write;

/// The process metrics and the build's, as Prometheus text; a `process_*` line is left out
/// where there is no `/proc` to read it from.
pub fn render() -> String {
    let stat = Stat::read();
    let tick = clock_ticks_per_second();
    let start = stat
        .as_ref()
        .zip(boot_time())
        .map(|(s, boot)| boot as f64 + s.start_ticks as f64 / tick);
    let families: [(&str, &str, &str, Option<f64>); 7] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            stat.as_ref().map(|s| (s.utime + s.stime) as f64 / tick),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            resident_bytes().map(|b| b as f64),
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            stat.as_ref().map(|s| s.vsize as f64),
        ),
        (
            "process_threads",
            "gauge",
            "Number of OS threads in the process.",
            stat.as_ref().map(|s| s.threads as f64),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            start,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open_fds().map(|n| n as f64),
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max_fds().map(|n| n as f64),
        ),
    ];
    let mut text = String::new();
    for (name, kind, help, value) in families {
        if let Some(value) = value {
            let _ = writeln!(
                text,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
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

/// What `/proc/self/stat` says of this process.
struct Stat {
    utime: u64,
    stime: u64,
    threads: u64,
    start_ticks: u64,
    vsize: u64,
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
        })
    }
}

/// Clock ticks a second, the unit of `/proc`'s times: Linux's USER_HZ, which its ABI fixes at
/// 100 whatever the kernel's own tick (what `sysconf(_SC_CLK_TCK)` answers).
fn clock_ticks_per_second() -> f64 {
    100.0
}

/// The resident set, from `/proc/self/status` (in kB there, whatever the page size).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
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
        assert!(Stat::parse("garbage").is_none());
    }

    #[test]
    fn this_process_is_measured() {
        let value = |text: &str, name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .parse()
                .unwrap()
        };
        // Some CPU time: spin until a tick of it is counted (on a busy machine this thread may
        // wait a while for one).
        let spin = std::time::Instant::now();
        while value(&render(), "process_cpu_seconds_total") == 0.0 {
            assert!(
                spin.elapsed() < std::time::Duration::from_secs(30),
                "no CPU time counted"
            );
            std::hint::black_box((0..100_000u64).sum::<u64>());
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
            let value = value(&text, name);
            assert!(value > 0.0, "{name} is {value}");
        }
        assert!(text.contains("floodgate_build_info{version=\""), "{text}");
    }
}
