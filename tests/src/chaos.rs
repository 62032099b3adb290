//! A fault-injecting TCP proxy (after crates.io's ChaosProxy): put it between a service and a
//! dependency, then `cut` it to make the dependency vanish for that service alone (open
//! connections are dropped, new ones refused at once) and `restore` it to bring it back, or
//! `hold` the dependency's replies (requests still reach it and take effect; the answers wait)
//! and `release` them, or `delay` every reply by a latency (a slow dependency: pipelined replies
//! still overlap, as on a slow network, rather than queueing behind each other's delay). Other
//! tests keep using the shared dependency undisturbed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

pub struct ChaosProxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
    /// True while the upstream's replies are held back.
    held: watch::Sender<bool>,
    /// Replies still let through before the proxy holds the rest (see [`ChaosProxy::hold_after`]).
    pass: Arc<std::sync::atomic::AtomicI64>,
    /// Replies read from the upstream and waiting to be let through.
    waiting: Arc<std::sync::atomic::AtomicI64>,
    /// How long each reply is kept before it is let through.
    delay: watch::Sender<Duration>,
}

impl ChaosProxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let (held, _) = watch::channel(false);
        let accept_cut = cut.clone();
        let accept_generation = generation.clone();
        let accept_held = held.clone();
        let pass = Arc::new(std::sync::atomic::AtomicI64::new(-1));
        let accept_pass = pass.clone();
        let waiting = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let accept_waiting = waiting.clone();
        let (delay, _) = watch::channel(Duration::ZERO);
        let accept_delay = delay.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if accept_cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cut_signal = accept_generation.subscribe();
                let held = accept_held.clone();
                let pass = accept_pass.clone();
                let waiting = accept_waiting.clone();
                let delay = accept_delay.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let requests = async {
                        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                        let _ = server_write.shutdown().await;
                    };
                    let replies = copy_unless_held(
                        &mut server_read,
                        &mut client_write,
                        Faults {
                            held,
                            pass,
                            waiting,
                            delay,
                        },
                    );
                    tokio::select! {
                        _ = async { tokio::join!(requests, replies) } => {}
                        _ = cut_signal.changed() => {}
                    }
                });
            }
        });
        Self {
            addr,
            cut,
            generation,
            held,
            pass,
            waiting,
            delay,
        }
    }

    /// Delays every reply by `latency` from the moment the upstream sent it (zero: none), below
    /// the client's timeout, so the dependency is slow rather than gone. Replies already in
    /// flight keep the delay they were read with.
    pub fn delay(&self, latency: Duration) {
        self.delay.send_replace(latency);
    }

    /// Replies the upstream has sent that are being held back now.
    pub fn waiting(&self) -> i64 {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Holds back the upstream's replies: requests still arrive and take effect, their answers
    /// wait until [`ChaosProxy::release`].
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Delivers the held replies and lets later ones through.
    pub fn release(&self) {
        self.pass.store(-1, Ordering::SeqCst);
        self.held.send_replace(false);
    }

    /// Lets the next `n` replies through, then holds the rest. A reply here is one read from
    /// the upstream: on loopback a small reply (a Redis script's answer, say) arrives in one.
    pub fn hold_after(&self, n: i64) {
        self.pass.store(n, Ordering::SeqCst);
    }
}

/// What the replies' copy is told to do: hold (`held`, `pass`, counting what `waiting`), and
/// delay by the latency `delay` holds.
struct Faults {
    held: watch::Sender<bool>,
    pass: Arc<std::sync::atomic::AtomicI64>,
    waiting: Arc<std::sync::atomic::AtomicI64>,
    delay: watch::Receiver<Duration>,
}

/// Copies `from` to `to`: each read is stamped with when it is due (now plus the delay) and
/// written no earlier, by a writer of its own, so a delay is a latency and not a queue; and
/// waits before each write while `held` is true, counting `pass` down per read while it is
/// positive and holding once it reaches zero.
async fn copy_unless_held(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    faults: Faults,
) {
    let Faults {
        held,
        pass,
        waiting,
        delay,
    } = faults;
    // A few replies in flight: a reader far ahead of its writer waits (bounded memory).
    let (due, mut due_rx) = mpsc::channel::<(Instant, Vec<u8>)>(1024);
    let reading = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let at = Instant::now() + *delay.borrow();
            if due.send((at, buf[..n].to_vec())).await.is_err() {
                break;
            }
        }
    };
    let writing = async move {
        let mut held_now = held.subscribe();
        while let Some((at, bytes)) = due_rx.recv().await {
            tokio::time::sleep_until(at).await;
            let left = pass.load(Ordering::SeqCst);
            if left == 0 {
                held.send_replace(true);
            } else if left > 0 {
                pass.fetch_sub(1, Ordering::SeqCst);
            }
            if *held_now.borrow_and_update() {
                waiting.fetch_add(1, Ordering::SeqCst);
                let let_through = held_now.wait_for(|held| !*held).await.is_ok();
                waiting.fetch_sub(1, Ordering::SeqCst);
                if !let_through {
                    break;
                }
            }
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}
