//! A network namespace of a test's own (`ip netns`, from Debian's iproute2): for what depends on
//! the network's own settings, such as a narrower range of source ports, which a test must not
//! change on the machine every other test shares. Inside it, only its own loopback: whatever
//! the processes there need from outside reaches them through a Unix socket ([`UnixForward`]),
//! since a socket's file is seen from every namespace.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::unique;

pub struct Netns {
    pub name: String,
}

fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        output.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Netns {
    /// A new namespace with its loopback up.
    pub fn new(prefix: &str) -> Self {
        // Namespace names are file names under /run/netns: short and plain.
        let name = unique(prefix);
        ip(&["netns", "add", &name]);
        let ns = Self { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Sets a sysctl of this namespace's own (`net.*`), as a Pod's `securityContext.sysctls`.
    pub fn sysctl(&self, key: &str, value: &str) {
        let status = self
            .command("sysctl")
            .args(["-q", "-w", &format!("{key}={value}")])
            .status()
            .expect("sysctl");
        assert!(status.success(), "sysctl {key}={value}");
    }

    /// `program`, to be run inside this namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }

    /// Whether something inside this namespace takes connections at `addr`.
    pub fn listens(&self, addr: SocketAddr) -> bool {
        self.command("bash")
            .args(["-c", &format!(": > /dev/tcp/{}/{}", addr.ip(), addr.port())])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
    }
}

/// A Unix socket whose every connection is passed on to a TCP address outside any namespace
/// (the shared Redis, say), for as long as it is kept.
pub struct UnixForward {
    pub path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl UnixForward {
    /// Listens at a new socket in `dir`, passing each connection on to `to`.
    pub fn to(to: SocketAddr, dir: &Path) -> Self {
        let path = dir.join(unique("fwd-") + ".sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("a Unix socket");
        let task = tokio::spawn(async move {
            while let Ok((mut inside, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut outside) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
                    }
                });
            }
        });
        Self { path, task }
    }
}

impl Drop for UnixForward {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}
