//! `floodgate-loadgen fault`: a saturated Redis, as a benchmark's named fault. A TCP proxy on
//! loopback in front of a real Redis that lets through at most `--replies-per-sec` replies a
//! second, over every connection together, in the order they came: what a primary whose CPU is
//! taken (by another tenant, a slow script, a fork) does to its clients. Below the limit it adds
//! nothing; above it, replies queue, their latency grows with the queue, and a client's timeout
//! turns the queue into errors. That is the fault an admission autopilot must see and answer
//! (the benchmark's `autopilot` scenario runs the same sale through it with the autopilot off
//! and on).
//!
//! Replies are counted, not bytes or reads: the proxy follows the RESP framing of what the
//! upstream sends (`Resp`), so a pipelined batch costs what its replies cost, as on a real
//! server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// What to run: `floodgate-loadgen fault --help` documents each.
#[derive(Clone, Debug, clap::Args)]
pub struct FaultArgs {
    /// Where the services connect instead of Redis (loopback).
    #[arg(long)]
    pub listen: SocketAddr,
    /// The real Redis (loopback).
    #[arg(long, default_value = "127.0.0.1:6379")]
    pub upstream: SocketAddr,
    /// The most replies a second the saturated Redis gives, over every connection.
    #[arg(long)]
    pub replies_per_sec: f64,
}

/// Serves until killed.
pub async fn run(args: FaultArgs) -> anyhow::Result<()> {
    crate::loopback_only([args.listen.ip(), args.upstream.ip()])?;
    anyhow::ensure!(
        args.replies_per_sec.is_finite() && args.replies_per_sec > 0.0,
        "--replies-per-sec must be above 0"
    );
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let pace = Arc::new(Pace::new(args.replies_per_sec));
    eprintln!(
        "fault: {} -> {} at most {} replies/s",
        args.listen, args.upstream, args.replies_per_sec
    );
    loop {
        let (client, _) = listener.accept().await?;
        let (pace, upstream) = (pace.clone(), args.upstream);
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                let _ = relay(client, server, &pace).await;
            }
        });
    }
}

/// The one server's time, shared by every connection: each reply takes the next free slot.
struct Pace {
    every: Duration,
    next: Mutex<Instant>,
}

impl Pace {
    fn new(per_sec: f64) -> Self {
        Self {
            every: Duration::from_secs_f64(1.0 / per_sec),
            next: Mutex::new(Instant::now()),
        }
    }

    /// When the next reply may go: its slot, taken now.
    async fn slot(&self) -> Instant {
        let mut next = self.next.lock().await;
        let slot = (*next).max(Instant::now());
        *next = slot + self.every;
        slot
    }
}

/// Requests go straight through; replies go out one by one, each at its slot.
async fn relay(client: TcpStream, server: TcpStream, pace: &Pace) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = async {
        tokio::io::copy(&mut client_read, &mut server_write).await?;
        server_write.shutdown().await
    };
    let replies = async {
        let mut pending = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = server_read.read(&mut chunk).await?;
            if n == 0 {
                return client_write.shutdown().await;
            }
            pending.extend_from_slice(&chunk[..n]);
            let mut sent = 0;
            while let Some(len) = Resp::length(&pending[sent..]) {
                tokio::time::sleep_until(pace.slot().await).await;
                client_write.write_all(&pending[sent..sent + len]).await?;
                sent += len;
            }
            pending.drain(..sent);
        }
    };
    tokio::select! {
        r = requests => r,
        r = replies => r,
    }
}

/// RESP (2 and 3) framing: how long the first whole reply of a buffer is.
struct Resp;

impl Resp {
    /// The length of the complete value at the start of `buf`, or `None` if it is not all
    /// there yet (or is not RESP: then it never completes, and the connection waits for its
    /// client to give up, as a broken server's would).
    fn length(buf: &[u8]) -> Option<usize> {
        let line = Self::line(buf)?;
        // A line is a type byte, its head, and CRLF: anything shorter is not RESP.
        let head = std::str::from_utf8(buf.get(1..line.checked_sub(2)?)?).ok()?;
        match buf[0] {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(line),
            b'$' | b'!' | b'=' => {
                let len: i64 = head.parse().ok()?;
                if len < 0 {
                    return Some(line);
                }
                let end = line + len as usize + 2;
                (buf.len() >= end).then_some(end)
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let count: i64 = head.parse().ok()?;
                let elements = match buf[0] {
                    b'%' | b'|' => count.max(0) * 2,
                    _ => count.max(0),
                };
                let mut at = line;
                for _ in 0..elements {
                    at += Self::length(&buf[at..])?;
                }
                if buf[0] == b'|' {
                    // An attribute comes before the reply it annotates: one value with it.
                    at += Self::length(&buf[at..])?;
                }
                Some(at)
            }
            _ => None,
        }
    }

    /// The end of the first line (past its CRLF), if it is all there.
    fn line(buf: &[u8]) -> Option<usize> {
        buf.windows(2).position(|w| w == b"\r\n").map(|at| at + 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_reply_is_found_and_a_partial_one_waits() {
        let cases: &[(&[u8], Option<usize>)] = &[
            (b"+OK\r\n", Some(5)),
            (b":42\r\n:1\r\n", Some(5)),
            (b"$5\r\nhello\r\n+OK\r\n", Some(11)),
            (b"$-1\r\n", Some(5)),
            (b"$5\r\nhel", None),
            (b"*2\r\n$1\r\na\r\n:7\r\n", Some(15)),
            (b"*2\r\n$1\r\na\r\n", None),
            (b"*-1\r\n", Some(5)),
            (b"%1\r\n+k\r\n:1\r\n", Some(12)),
            (b"*1\r\n*1\r\n+x\r\n", Some(12)),
            (b"+OK", None),
            (b"", None),
            (b"\r\n", None),
        ];
        for (buf, want) in cases {
            assert_eq!(
                Resp::length(buf),
                *want,
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
    }

    #[tokio::test]
    async fn replies_take_slots_one_after_another_at_the_pace() {
        let pace = Pace::new(100.0);
        let mut slots = Vec::new();
        for _ in 0..5 {
            slots.push(pace.slot().await);
        }
        // Taken at once, they are 10 ms apart: a queue, served at 100 a second.
        assert!(slots
            .windows(2)
            .all(|w| w[1] - w[0] == Duration::from_millis(10)));
    }
}
