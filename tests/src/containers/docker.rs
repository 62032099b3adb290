//! The Docker engine `deploy/image.sh` starts, driven with Debian's client.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The Docker engine `deploy/image.sh` started, and the images it built.
#[derive(Clone)]
pub struct Docker {
    pub(super) client: PathBuf,
    pub(super) host: String,
    /// Floodgate's image (`floodgate:ci`).
    pub image: String,
    /// The edge's image (`floodgate-edge:ci`).
    pub edge_image: String,
}

impl Docker {
    /// The engine and images `deploy/test.sh` made ready (`deploy/image.sh build`).
    pub fn from_env() -> Docker {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: the container tests need the engine and images of \
                     `deploy/image.sh build` (deploy/test.sh runs it and sets {name})"
                )
            })
        };
        Docker {
            client: var("FLOODGATE_DOCKER").into(),
            host: var("DOCKER_HOST"),
            image: var("FLOODGATE_TEST_IMAGE"),
            edge_image: var("FLOODGATE_TEST_EDGE_IMAGE"),
        }
    }

    /// `docker <args>`, waited for.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.client)
            .env("DOCKER_HOST", &self.host)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("the docker client runs")
    }

    /// `docker <args>`, which must succeed: its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A container's last log lines (both streams).
    pub fn logs(&self, name: &str, lines: u32) -> String {
        let out = self.run(&["logs", "--tail", &lines.to_string(), name]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}
