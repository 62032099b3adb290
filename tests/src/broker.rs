//! A private Kafka-API broker (Tansu) for tests that stop the broker: it runs on its own port
//! with its own in-memory storage, so stopping it never disturbs the shared broker other tests
//! use. A restart on the same port comes back empty: the harder case for Floodgate, whose events
//! must then all come from its own outboxes.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The Tansu binary: `FLOODGATE_TANSU`, else where `deploy/stack.sh` installs it.
pub fn tansu_binary() -> PathBuf {
    if let Ok(path) = std::env::var("FLOODGATE_TANSU") {
        return path.into();
    }
    crate::floodgate_home().join("tansu-0.6.0/bin/tansu")
}

/// The broker's log, appended across restarts, kept beside its data while the test runs.
fn log_file(dir: &std::path::Path) -> Stdio {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("tansu.log"))
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null())
}

pub struct PrivateBroker {
    pub port: u16,
    /// The address clients are told to connect to (a proxy in front of the broker, say).
    advertised: String,
    /// `memory://tansu/` (gone on restart) or `sqlite://tansu.db` (kept).
    storage: &'static str,
    /// Whether clients must authenticate (SASL SCRAM) before anything else.
    authentication: bool,
    dir: PathBuf,
    child: Option<Child>,
}

impl PrivateBroker {
    pub async fn start() -> Self {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            probe.local_addr().unwrap().port()
        };
        Self::start_on(port, None).await
    }

    /// Starts on `port`, telling clients to reach it at `advertised` (for instance a
    /// [`crate::chaos::ChaosProxy`] in front of it), so that every client connection, not only
    /// the bootstrap one, goes through that address. Default: the port itself.
    pub async fn start_on(port: u16, advertised: Option<std::net::SocketAddr>) -> Self {
        let dir = std::env::temp_dir().join(crate::unique("floodgate-broker-"));
        std::fs::create_dir_all(&dir).expect("broker data dir");
        let advertised = advertised.map_or_else(|| format!("127.0.0.1:{port}"), |a| a.to_string());
        let mut broker = Self {
            port,
            advertised,
            // Tansu 0.6's sqlite engine panics on requests from a producer id it does not know
            // (a client of the broker's previous life) and then stops answering; the memory
            // engine answers them with an error the client recovers from.
            storage: "memory://tansu/",
            authentication: false,
            dir,
            child: None,
        };
        broker.resume().await;
        broker
    }

    /// A broker that requires SASL SCRAM-SHA-512 from every client, knowing `users` (name,
    /// password), advertising `advertised` (a TLS proxy in front of it, say). Users are made
    /// through the broker itself, which then restarts with authentication on; its storage is
    /// sqlite so that they survive the restart.
    pub async fn start_authenticated(
        users: &[(&str, &str)],
        advertised: Option<std::net::SocketAddr>,
    ) -> Self {
        let mut broker = Self::start().await;
        broker.stop();
        broker.storage = "sqlite://tansu.db";
        broker.resume().await;
        for (name, password) in users {
            let status = Command::new(tansu_binary())
                .args(["user", "create", "--broker"])
                .arg(format!("tcp://127.0.0.1:{}", broker.port))
                .args([*name, *password, "--mechanism", "scram512"])
                .stdout(Stdio::null())
                .stderr(log_file(&broker.dir))
                .status()
                .expect("tansu user create runs");
            assert!(status.success(), "tansu user create {name} failed");
        }
        broker.stop();
        broker.authentication = true;
        if let Some(advertised) = advertised {
            broker.advertised = advertised.to_string();
        }
        broker.resume().await;
        broker
    }

    /// Where clients connect (the advertised address).
    pub fn address(&self) -> String {
        self.advertised.clone()
    }

    /// Starts (again) on the same port.
    pub async fn resume(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let advertised = format!("tcp://{}", self.advertised);
        let child = Command::new(tansu_binary())
            .current_dir(&self.dir)
            .args(["broker", "--listener-url", &url])
            .args(["--advertised-listener-url", &advertised])
            .args(["--storage-engine", self.storage])
            .args(self.authentication.then_some("--authentication"))
            .stdout(Stdio::null())
            .stderr(log_file(&self.dir))
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

    /// Starts again on the same port with no data at all (a replacement broker).
    pub async fn resume_fresh(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).expect("broker data dir");
        self.resume().await;
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
        if std::thread::panicking() {
            // The broker's own account of a failed test.
            if let Ok(log) = std::fs::read_to_string(self.dir.join("tansu.log")) {
                eprintln!("--- private broker log ---\n{log}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
