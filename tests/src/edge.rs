//! The CDN in front: real nginx (Debian's, installed by deploy/stack.sh) running
//! `deploy/nginx/cdn.conf` with a test's own addresses, in a directory of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::unique;

/// Where Debian puts nginx.
const NGINX: &str = "/usr/sbin/nginx";

/// Addresses as the services' and the edge's settings take them: `host:port`, comma-separated.
pub fn address_list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub struct Edge {
    pub addr: SocketAddr,
    /// Where it serves its own metrics (`/metrics`).
    pub metrics: SocketAddr,
    /// Where it sends plain http:// to https://.
    pub redirect: SocketAddr,
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

    /// [`Edge::start`] with settings of the edge's own besides (`FLOODGATE_EDGE_REAL_IP_FROM`,
    /// say).
    pub async fn start_with_settings(
        gateways: &[SocketAddr],
        booking: SocketAddr,
        settings: &[(&str, &str)],
    ) -> Edge {
        let nginx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nginx");
        Self::launch(gateways, booking, &nginx.join("cdn.conf"), settings).await
    }

    /// [`Edge::start`] with another template than the shipped `cdn.conf` (the shipped one with
    /// a limit made small enough to reach, say).
    pub async fn start_with(
        gateways: &[SocketAddr],
        booking: SocketAddr,
        template: &std::path::Path,
    ) -> Edge {
        Self::launch(gateways, booking, template, &[]).await
    }

    async fn launch(
        gateways: &[SocketAddr],
        booking: SocketAddr,
        template: &std::path::Path,
        settings: &[(&str, &str)],
    ) -> Edge {
        assert!(
            std::path::Path::new(NGINX).exists(),
            "{NGINX} is missing: deploy/stack.sh up installs it"
        );
        // A port handed out free can still be taken by another test's listener in the moment
        // before nginx binds it: nginx then stops ("Address already in use"), and is started
        // again on another.
        for _ in 0..3 {
            if let Some(edge) = Self::try_start(gateways, booking, template, settings).await {
                return edge;
            }
        }
        panic!("nginx found its port taken three times over");
    }

    /// Starts nginx on a free port: `None` if another listener took the port first.
    async fn try_start(
        gateways: &[SocketAddr],
        booking: SocketAddr,
        template: &std::path::Path,
        settings: &[(&str, &str)],
    ) -> Option<Edge> {
        // Below the ephemeral range (crate::gateways::free_port): a port bound to 0 and let go
        // could be taken by any outgoing connection.
        let addr = crate::gateways::free_port();
        let metrics = crate::gateways::free_port();
        let redirect = crate::gateways::free_port();
        let dir = std::env::temp_dir().join(unique("floodgate-edge-"));
        std::fs::create_dir_all(&dir).unwrap();
        let nginx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nginx");
        // Its errors go to its stderr (as in a container): kept in error.log here.
        let log = dir.join("error.log");
        let child = Command::new(nginx.join("edge.sh"))
            .env("PATH", "/usr/sbin:/usr/bin:/bin")
            .env("FLOODGATE_EDGE_LISTEN", addr.to_string())
            .env("FLOODGATE_EDGE_METRICS_LISTEN", metrics.to_string())
            .env("FLOODGATE_EDGE_REDIRECT_LISTEN", redirect.to_string())
            .env("FLOODGATE_EDGE_GATEWAYS", address_list(gateways))
            .env("FLOODGATE_EDGE_BOOKING", address_list(&[booking]))
            .env("FLOODGATE_EDGE_PREFIX", &dir)
            .env("FLOODGATE_EDGE_TEMPLATE", template)
            .env("FLOODGATE_EDGE_KEY", crate::edge_key())
            .envs(settings.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("edge.sh starts nginx");
        let mut edge = Edge {
            addr,
            metrics,
            redirect,
            dir,
            child,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        // Listening, and this nginx (edge.sh execs it): it writes its pid once its sockets are
        // bound. Another test's listener on the port would answer the connect alone, and this
        // test would then talk to it, with other limits or none.
        let pid = edge.child.id().to_string();
        while std::fs::read_to_string(edge.dir.join("nginx.pid"))
            .map_or(true, |written| written.trim() != pid)
            || tokio::net::TcpStream::connect(addr).await.is_err()
        {
            if let Ok(Some(status)) = edge.child.try_wait() {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                if said.contains("Address already in use") {
                    return None;
                }
                panic!("nginx stopped ({status}): {said}");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "nginx did not listen; see {}",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(edge)
    }

    /// What nginx has written to its error log so far: why it answered a 502 of its own, say.
    pub fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }

    /// Its metrics as Prometheus scrapes them.
    pub async fn scrape(&self) -> String {
        let answer = reqwest::get(format!("http://{}/metrics", self.metrics))
            .await
            .expect("the edge serves its metrics");
        assert_eq!(answer.status(), 200, "the edge's /metrics");
        answer.text().await.unwrap()
    }

    /// How many answers the edge counts of `status` made `by` the edge, its cache or an
    /// origin (0 when none yet).
    pub async fn answers(&self, status: u16, by: &str) -> u64 {
        let series = format!("floodgate_edge_answers_total{{status=\"{status}\",by=\"{by}\"}}");
        crate::scrape(self.metrics, &series).await.unwrap_or(0.0) as u64
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The WebSocket address of `sale`'s waiting room through this edge.
    pub fn ws_url(&self, sale: &str) -> String {
        format!("ws://{}/ws?sale={sale}", self.addr)
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
