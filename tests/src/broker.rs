//! A private Kafka-API broker (Tansu) for tests that stop the broker: it runs on its own port
//! with its own sqlite data, so stopping it never disturbs the shared broker other tests use, and
//! a restart on the same port keeps its topics, messages and group offsets.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The Tansu binary: `FLOODGATE_TANSU`, else where `deploy/stack.sh` installs it.
pub fn tansu_binary() -> PathBuf {
    if let Ok(path) = std::env::var("FLOODGATE_TANSU") {
        return path.into();
    }
    let home = std::env::var("FLOODGATE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/floodgate")
        });
    home.join("tansu-0.6.0/bin/tansu")
}

pub struct PrivateBroker {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl PrivateBroker {
    pub async fn start() -> Self {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            probe.local_addr().unwrap().port()
        };
        let dir = std::env::temp_dir().join(crate::unique("floodgate-broker-"));
        std::fs::create_dir_all(&dir).expect("broker data dir");
        let mut broker = Self {
            port,
            dir,
            child: None,
        };
        broker.resume().await;
        broker
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts (again) on the same port and data.
    pub async fn resume(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let child = Command::new(tansu_binary())
            .current_dir(&self.dir)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "sqlite://tansu.db"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tansu starts (run deploy/stack.sh up once to build it)");
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "private broker did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the broker (as a crash would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
