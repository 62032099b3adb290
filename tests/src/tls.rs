//! TLS for the tests: a certificate authority each test makes for itself, the files a server or
//! client is given, a TLS-terminating proxy (the broker does not speak TLS itself, and the
//! sandbox provider serves plain HTTP), and private Redis and PostgreSQL servers with TLS on.
//! Nothing here touches the shared services.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::gateways::free_port;

/// A certificate authority of the test's own, and the directory its files are written to.
pub struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
    pub dir: PathBuf,
}

/// A server's (or client's) certificate and key, as PEM files signed by a [`TestCa`].
#[derive(Clone, Debug)]
pub struct Identity {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TestCa {
    /// A new authority named `name`, its files in a fresh temporary directory.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(crate::unique("floodgate-tls-"));
        std::fs::create_dir_all(&dir).expect("TLS directory");
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("CA certificate");
        std::fs::write(dir.join("ca.pem"), cert.pem()).expect("CA file");
        Self { cert, key, dir }
    }

    /// The PEM file clients are told to trust.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `names` (DNS names or IP addresses), written as `<file>.pem` and
    /// `<file>.key`.
    pub fn issue(&self, file: &str, names: &[&str]) -> Identity {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.distinguished_name.push(DnType::CommonName, file);
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("certificate");
        let identity = Identity {
            cert_file: self.dir.join(format!("{file}.pem")),
            key_file: self.dir.join(format!("{file}.key")),
        };
        std::fs::write(&identity.cert_file, cert.pem()).expect("certificate file");
        std::fs::write(&identity.key_file, key.serialize_pem()).expect("key file");
        identity
    }

    /// A server certificate for this machine's loopback names.
    pub fn localhost(&self) -> Identity {
        self.issue("localhost", &["localhost", "127.0.0.1"])
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Makes sure the process has a rustls provider (the services install ring at start; a test
/// that makes its own TLS config may run before any service).
pub fn install_provider() {
    floodgate_platform::runtime::install_tls_provider();
}

/// Accepts TLS on its own port and forwards the plaintext to `target`: in front of the broker
/// (whose advertised listener is then this proxy) or of the sandbox payment provider.
pub struct TlsProxy {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl TlsProxy {
    /// Starts a proxy on `port` (0: any) presenting `identity`.
    pub async fn start_on(port: u16, identity: &Identity, target: SocketAddr) -> Self {
        install_provider();
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(&identity.cert_file)
            .expect("certificate file")
            .collect::<Result<Vec<_>, _>>()
            .expect("certificates");
        let key =
            rustls::pki_types::PrivateKeyDer::from_pem_file(&identity.key_file).expect("key file");
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends its own connection: nothing
                    // to forward.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut upstream) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                });
            }
        });
        Self { addr, task }
    }

    pub async fn start(identity: &Identity, target: SocketAddr) -> Self {
        Self::start_on(0, identity, target).await
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A private Redis with a plaintext port (for the test's own set-up) and a TLS port (for the
/// service under test) over the same data.
pub struct TlsRedis {
    pub port: u16,
    pub tls_port: u16,
    child: Child,
}

impl TlsRedis {
    pub async fn start(server: &Identity, ca_file: &Path) -> Self {
        Self::start_with(server, ca_file, "no").await
    }

    /// A server that accepts a TLS client only with a certificate of `ca_file`'s CA.
    pub async fn start_requiring_client_certificates(server: &Identity, ca_file: &Path) -> Self {
        Self::start_with(server, ca_file, "yes").await
    }

    async fn start_with(server: &Identity, ca_file: &Path, client_certificates: &str) -> Self {
        let (port, tls_port) = (free_port().port(), free_port().port());
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--tls-port",
                &tls_port.to_string(),
            ])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(redis_tls_files(server, ca_file))
            .args(["--tls-auth-clients", client_certificates])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        wait_for_port(tls_port).await;
        wait_for_port(port).await;
        Self {
            port,
            tls_port,
            child,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn tls_url(&self) -> String {
        format!("rediss://localhost:{}", self.tls_port)
    }
}

/// The arguments that give `redis-server` its certificate, key and CA (clients are not asked for
/// certificates unless a later `--tls-auth-clients yes` says so).
fn redis_tls_files(server: &Identity, ca_file: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for (flag, path) in [
        ("--tls-cert-file", server.cert_file.as_path()),
        ("--tls-key-file", server.key_file.as_path()),
        ("--tls-ca-cert-file", ca_file),
    ] {
        args.push(flag.into());
        args.push(path.into());
    }
    args.extend(["--tls-auth-clients".into(), "no".into()]);
    args
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private Redis Cluster that speaks TLS only (no plaintext port): three primaries and three
/// replicas, replication and the cluster bus over TLS too. Its nodes announce their TLS ports,
/// so a client follows the cluster's redirections over TLS.
pub struct TlsRedisCluster {
    /// Seed nodes, `rediss://<host>:<port>`.
    pub seeds: Vec<String>,
    ca_file: PathBuf,
    ports: Vec<u16>,
    children: Vec<Child>,
    dir: PathBuf,
}

impl TlsRedisCluster {
    /// Nodes known by their address, 127.0.0.1 (the certificate must name it).
    pub async fn start(server: &Identity, ca_file: &Path) -> Self {
        Self::start_announcing(server, ca_file, None).await
    }

    /// Nodes that announce `hostname` (`cluster-announce-hostname`) and have clients dial them
    /// by it (`cluster-preferred-endpoint-type hostname`), as a cluster whose certificates name
    /// DNS names only must; the seeds name it too.
    pub async fn start_named(server: &Identity, ca_file: &Path, hostname: &str) -> Self {
        Self::start_announcing(server, ca_file, Some(hostname)).await
    }

    async fn start_announcing(server: &Identity, ca_file: &Path, hostname: Option<&str>) -> Self {
        let dir = std::env::temp_dir().join(crate::unique("floodgate-tls-cluster-"));
        // Six ports whose cluster bus ports (+10000) are free too.
        let mut ports = Vec::new();
        while ports.len() < 6 {
            let port = free_port().port();
            let bus_free = std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok();
            if port < 55_000 && bus_free && !ports.contains(&port) {
                ports.push(port);
            }
        }
        let mut children = Vec::new();
        for port in &ports {
            let node = dir.join(port.to_string());
            std::fs::create_dir_all(&node).expect("node dir");
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                ])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
                .args(["--tls-cluster", "yes", "--tls-replication", "yes"])
                .args(["--save", "", "--appendonly", "no"])
                .args(hostname.into_iter().flat_map(|name| {
                    [
                        "--cluster-announce-hostname",
                        name,
                        "--cluster-preferred-endpoint-type",
                        "hostname",
                    ]
                }))
                .arg("--dir")
                .arg(&node)
                .args(redis_tls_files(server, ca_file))
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            children.push(child);
        }
        for port in &ports {
            wait_for_port(*port).await;
        }
        let mut cluster = Self {
            seeds: ports
                .iter()
                .map(|p| format!("rediss://{}:{p}", hostname.unwrap_or("127.0.0.1")))
                .collect(),
            ca_file: ca_file.to_owned(),
            ports,
            children,
            dir,
        };
        cluster.create().await;
        cluster
    }

    /// `redis-cli --tls` against node `port` with `args`: its output.
    fn cli(&self, port: u16, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["--tls", "--cacert"])
            .arg(&self.ca_file)
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    }

    async fn create(&mut self) {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(nodes.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "1", "--cluster-yes"]);
        let said = self.cli(self.ports[0], &args);
        assert!(
            said.contains("All 16384 slots covered"),
            "cluster create: {said}"
        );
        // Every node agrees, and every primary's replica is in sync before anything is written
        // (the services wait for a replica on every promised write).
        crate::eventually(
            "the TLS cluster is ready",
            Duration::from_secs(30),
            || async {
                self.ports.iter().all(|port| {
                    let info = self.cli(*port, &["cluster", "info"]);
                    let replication = self.cli(*port, &["info", "replication"]);
                    info.contains("cluster_state:ok")
                        && (replication.contains("role:slave")
                            || replication.contains("state=online"))
                })
            },
        )
        .await;
    }
}

impl Drop for TlsRedisCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A private PostgreSQL that accepts only TLS connections over TCP (`hostssl` in its
/// `pg_hba.conf`), run as the `postgres` user from Debian's server binaries.
pub struct TlsPostgres {
    pub port: u16,
    dir: PathBuf,
    child: Child,
}

impl TlsPostgres {
    pub async fn start(server: &Identity) -> Self {
        let bin = postgres_bin();
        let (uid, gid) = postgres_user();
        let dir = std::env::temp_dir().join(crate::unique("floodgate-pg-"));
        std::fs::create_dir_all(&dir).expect("data dir");
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown data dir");
        let data = dir.join("data");
        let status = Command::new(bin.join("initdb"))
            .uid(uid)
            .gid(gid)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("initdb runs");
        assert!(status.success(), "initdb failed");
        // The server reads its key only if no one else can: a copy owned by postgres, 0600.
        for (from, to) in [
            (&server.cert_file, "server.crt"),
            (&server.key_file, "server.key"),
        ] {
            let to = data.join(to);
            std::fs::copy(from, &to).expect("copy TLS file");
            std::os::unix::fs::chown(&to, Some(uid), Some(gid)).expect("chown TLS file");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .expect("pg_hba.conf");
        let port = free_port().port();
        let child = Command::new(bin.join("postgres"))
            .uid(uid)
            .gid(gid)
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args([
                "-c",
                "ssl=on",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=50",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("postgres starts");
        wait_for_port(port).await;
        Self { port, dir, child }
    }

    /// A URL that requires TLS and verifies the server against `ca_file` and its name.
    pub fn url(&self, ca_file: &Path) -> String {
        format!(
            "postgres://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
            self.port,
            ca_file.display()
        )
    }

    /// A URL that asks for no TLS at all (refused by this server's `pg_hba.conf`).
    pub fn plaintext_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown: its backends end with it.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

use std::os::unix::process::CommandExt as _;

/// Debian's PostgreSQL server binaries (the newest installed major version).
fn postgres_bin() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server binaries under /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL server installed")
}

/// The `postgres` user's uid and gid (the server will not run as root).
fn postgres_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&"postgres") && f.len() > 3)
        .map(|f| (f[2].parse().unwrap(), f[3].parse().unwrap()))
        .expect("a postgres user")
}

async fn wait_for_port(port: u16) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing listens on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
