//! The CDN in front: real nginx (Debian's, installed by deploy/stack.sh) running
//! `deploy/nginx/cdn.conf` with a test's own addresses, in a directory of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::unique;

/// Where Debian puts nginx.
const NGINX: &str = "/usr/sbin/nginx";

pub struct Edge {
    pub addr: SocketAddr,
    dir: PathBuf,
    child: Child,
}

impl Edge {
    /// Starts nginx in front of `gateways` and `booking` and waits until it listens.
    pub async fn start(gateways: &[SocketAddr], booking: SocketAddr) -> Edge {
        assert!(
            std::path::Path::new(NGINX).exists(),
            "{NGINX} is missing: deploy/stack.sh up installs it"
        );
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap();
        let dir = std::env::temp_dir().join(unique("floodgate-edge-"));
        std::fs::create_dir_all(&dir).unwrap();
        let template = include_str!("../../deploy/nginx/cdn.conf");
        let servers = |addrs: &[SocketAddr]| {
            addrs
                .iter()
                .map(|a| format!("server {a};"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let config = template
            .replace("__LISTEN__", &addr.to_string())
            .replace("__GATEWAYS__", &servers(gateways))
            .replace("__BOOKING__", &servers(&[booking]))
            .replace("__PREFIX__", dir.to_str().unwrap());
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config).unwrap();
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            // It logs to error.log in its directory; its worker must not hold the test's pipes.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let edge = Edge { addr, dir, child };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "nginx did not listen; see {}",
                edge.dir.join("error.log").display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        edge
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        // SIGTERM: the master stops its worker too (a SIGKILL would orphan the worker).
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
