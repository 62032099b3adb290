//! What every scenario prints: a readable table on stdout (the JSON goes to `--json`), and
//! latency summaries.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// p50, p99 and max of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Latencies {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Latencies {
    pub fn of(samples: impl Iterator<Item = Duration>) -> Self {
        let mut ms: Vec<f64> = samples.map(|d| d.as_secs_f64() * 1000.0).collect();
        if ms.is_empty() {
            return Self::default();
        }
        ms.sort_by(f64::total_cmp);
        // Nearest rank: the smallest sample with at least q of all samples at or below it.
        let rank = |q: f64| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Self {
            n: ms.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: ms[ms.len() - 1],
        }
    }

    /// "12.0 / 48.3 / 51.2 ms" from the JSON form.
    pub fn describe(value: &Value) -> String {
        let f = |k: &str| value[k].as_f64().unwrap_or(0.0);
        format!("{:.1} / {:.1} / {:.1} ms", f("p50"), f("p99"), f("max"))
    }
}

/// This process's CPU time so far, user and system (from `/proc/self/stat`), so a scenario can
/// report its own cost over the part it timed: BENCHMARKS.md sets every process's CPU in one
/// run beside the others, and the load generator's must be told apart from the services'.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu {
    user_ticks: u64,
    system_ticks: u64,
}

/// The unit of `/proc`'s CPU times: USER_HZ, 100 on every Linux ABI this runs on.
const TICKS_PER_SECOND: f64 = 100.0;

impl Cpu {
    /// Now (zero where `/proc` is not readable: the figure is then left out, not made up).
    pub fn now() -> Self {
        std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| Self::parse(&stat))
            .unwrap_or_default()
    }

    /// A `/proc/<pid>/stat` line: the fields after the command's name (which may hold spaces and
    /// parentheses, so it is skipped to its last `)`) are state, then ten more, then utime and
    /// stime (fields 14 and 15 of the whole line).
    fn parse(stat: &str) -> Option<Self> {
        let mut after_name = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let user_ticks = after_name.nth(11)?.parse().ok()?;
        let system_ticks = after_name.next()?.parse().ok()?;
        Some(Self {
            user_ticks,
            system_ticks,
        })
    }

    /// What was used since `self`: `{"user_s": .., "system_s": ..}`.
    pub fn since(self) -> Value {
        let now = Self::now();
        let seconds = |ticks: u64| ticks as f64 / TICKS_PER_SECOND;
        serde_json::json!({
            "user_s": seconds(now.user_ticks.saturating_sub(self.user_ticks)),
            "system_s": seconds(now.system_ticks.saturating_sub(self.system_ticks)),
        })
    }
}

/// A plain-text table with aligned columns.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: &[String]) {
        self.rows.push(cells.to_vec());
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns = self.header.len();
        let width = |i: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            writeln!(f, "  {}", padded.join("  ").trim_end())
        };
        line(f, &self.header)?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(f, &rule)?;
        for row in &self.rows {
            line(f, row)?;
        }
        Ok(())
    }
}

/// Resident memory of the processes, KiB, summed (`None` if any is unreadable or none given).
pub(crate) fn rss(pids: &[u32]) -> Option<u64> {
    if pids.is_empty() {
        return None;
    }
    pids.iter()
        .map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let l = Latencies::of((1..=100).map(Duration::from_millis));
        assert_eq!((l.n, l.p50, l.p99, l.max), (100, 50.0, 99.0, 100.0));
        let one = Latencies::of(std::iter::once(Duration::from_millis(7)));
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
        assert_eq!(Latencies::of(std::iter::empty()).n, 0);
    }

    #[test]
    fn cpu_times_are_read_past_a_name_with_spaces() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 731 29 0 0 20 0 3 0";
        let cpu = Cpu::parse(stat).expect("parses");
        assert_eq!((cpu.user_ticks, cpu.system_ticks), (731, 29));
        // This process has a readable stat of its own.
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(Cpu::parse(&own).is_some(), "{own}");
    }

    #[test]
    fn a_table_aligns_its_columns() {
        let mut t = Table::new(&["a", "value"]);
        t.row(&["longer".into(), "1".into()]);
        let text = t.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  a       value");
        assert_eq!(lines[2], "  longer  1");
    }
}
