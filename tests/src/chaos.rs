//! A fault-injecting TCP proxy (after crates.io's ChaosProxy): put it between a service and a
//! dependency, then `cut` it to make the dependency vanish for that service alone (open
//! connections are dropped, new ones refused at once) and `restore` it to bring it back. Other
//! tests keep using the shared dependency undisturbed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct ChaosProxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
}

impl ChaosProxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let accept_cut = cut.clone();
        let accept_generation = generation.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if accept_cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cut_signal = accept_generation.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_signal.changed() => {}
                    }
                });
            }
        });
        Self {
            addr,
            cut,
            generation,
        }
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
}
