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
        // Below the ephemeral range, as every private server's (crate::gateways::free_port).
        let port = crate::gateways::free_port().port();
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

    /// A broker on sqlite storage (`sqlite://tansu.db`), the engine `deploy/stack.sh` runs: the one
    /// whose storage [`PrivateBroker::kill_storage`] can kill.
    pub async fn start_sqlite() -> Self {
        let mut broker = Self::start().await;
        broker.stop();
        broker.storage = "sqlite://tansu.db";
        broker.resume().await;
        broker
    }

    /// Kills the broker's storage the way load killed it ([`kill_storage`]). `topic` must exist.
    pub async fn kill_storage(&mut self, topic: &str) {
        let pid = self.child.as_ref().expect("the broker runs").id();
        kill_storage(&self.address(), pid, topic).await;
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

/// Kills the storage of the Tansu broker at `address` (process `pid`) the way load killed it
/// (Tansu 0.6's sqlite engine; docs/runbook.md, "The broker's storage died"): an idempotent
/// producer whose message timed out raises its own producer epoch (librdkafka does this to close
/// the gap in its sequence), and the engine panics on the first batch of an epoch it never
/// issued. The broker keeps its port open and fails every request from then on. `topic` must
/// exist.
pub async fn kill_storage(address: &str, pid: u32, topic: &str) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", address)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("request.timeout.ms", "1000")
        .set("message.timeout.ms", "1500")
        .create()
        .expect("a producer");
    let send = |payload: &'static str| {
        let producer = producer.clone();
        let topic = topic.to_owned();
        async move {
            let record = FutureRecord::to(&topic)
                .key("k")
                .payload(payload)
                .partition(0);
            producer
                .send(record, rdkafka::util::Timeout::Never)
                .await
                .map(drop)
                .map_err(|(e, _)| e)
        }
    };
    send("the producer's id and epoch 0")
        .await
        .expect("the broker takes a first message");
    // The broker stops answering: the next message times out, and the producer raises its epoch
    // on its own. On a loaded machine an answer already on its way can still arrive after the
    // stop: then the broker is stopped again, up to three times, until a message times out.
    let mut timed_out = Ok(());
    for _ in 0..3 {
        signal(pid, "STOP");
        timed_out = send("times out").await;
        signal(pid, "CONT");
        if timed_out.is_err() {
            break;
        }
    }
    assert!(
        timed_out.is_err(),
        "a stopped broker acknowledged three messages in a row: {timed_out:?}"
    );
    // The first batch of the new epoch.
    let _ = tokio::time::timeout(Duration::from_secs(10), send("epoch 1")).await;
    assert!(
        !round_trip(address, topic).await,
        "the broker's storage should be dead"
    );
}

/// Whether the broker at `address` takes a message and gives it back: a plain producer's send to
/// partition 0 of `topic` and a fetch of it, within a few seconds each.
pub async fn round_trip(address: &str, topic: &str) -> bool {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let marker = crate::unique("round-trip-");
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", address)
        .set("message.timeout.ms", "5000")
        .create()
        .expect("a producer");
    let record = FutureRecord::to(topic)
        .key("k")
        .payload(&marker)
        .partition(0);
    let Ok(delivered) = producer
        .send(record, rdkafka::util::Timeout::Never)
        .await
        .map_err(|(e, _)| e)
    else {
        return false;
    };
    let offset = delivered.offset;
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", address)
        .set("group.id", crate::unique("round-trip-"))
        .create()
        .expect("a consumer");
    let mut list = rdkafka::TopicPartitionList::new();
    list.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .expect("a partition");
    consumer.assign(&list).expect("assigned");
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
                return message.payload() == Some(marker.as_bytes());
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

/// Sends `signal` (`STOP`, `CONT`, ...) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}");
}
