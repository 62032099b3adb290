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
    /// Starts nginx in front of `gateways` and `booking` and waits until it listens. The
    /// configuration is made as the edge's image makes it: `deploy/nginx/edge.sh` fills
    /// `cdn.conf`'s placeholders in from the `FLOODGATE_EDGE_*` settings, then runs nginx. A
    /// gateway named several times is named so on purpose (the Kubernetes edge names its one
    /// Service three times, so that a refused upgrade can be tried again).
    pub async fn start(gateways: &[SocketAddr], booking: SocketAddr) -> Edge {
        let nginx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nginx");
        Self::start_with(gateways, booking, &nginx.join("cdn.conf")).await
    }

    /// [`Edge::start`] with another template than the shipped `cdn.conf` (the shipped one with
    /// a limit made small enough to reach, say).
    pub async fn start_with(
        gateways: &[SocketAddr],
        booking: SocketAddr,
        template: &std::path::Path,
    ) -> Edge {
        assert!(
            std::path::Path::new(NGINX).exists(),
            "{NGINX} is missing: deploy/stack.sh up installs it"
        );
        // Below the ephemeral range (crate::gateways::free_port): a port bound to 0 and let go
        // could be taken by another test's listener before nginx binds it, and this test would
        // then talk to that test's edge, with its limits.
        let addr = crate::gateways::free_port();
        let dir = std::env::temp_dir().join(unique("floodgate-edge-"));
        std::fs::create_dir_all(&dir).unwrap();
        let list = |addrs: &[SocketAddr]| {
            addrs
                .iter()
                .map(SocketAddr::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let nginx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nginx");
        // Its errors go to its stderr (as in a container): kept in error.log here.
        let log = std::fs::File::create(dir.join("error.log")).unwrap();
        let child = Command::new(nginx.join("edge.sh"))
            .env("PATH", "/usr/sbin:/usr/bin:/bin")
            .env("FLOODGATE_EDGE_LISTEN", addr.to_string())
            .env("FLOODGATE_EDGE_GATEWAYS", list(gateways))
            .env("FLOODGATE_EDGE_BOOKING", list(&[booking]))
            .env("FLOODGATE_EDGE_PREFIX", &dir)
            .env("FLOODGATE_EDGE_TEMPLATE", template)
            .env("FLOODGATE_EDGE_KEY", crate::edge_key())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("edge.sh starts nginx");
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
