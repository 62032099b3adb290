//! How each service of compose.yaml becomes `docker run` on the host's network: its containers
//! and their ports, its settings with the changes the host's network takes (each named), its
//! confinement, volumes and secrets, and the edge in front.

use super::*;

/// `docker run` arguments for what compose says of a service's confinement: its tmpfs mounts,
/// open-files limit, dropped capabilities and security options.
fn confinement(s: &Service) -> Vec<String> {
    let mut args = Vec::new();
    for path in &s.tmpfs {
        args.extend(["--tmpfs".into(), path.clone()]);
    }
    if let Some(n) = s.ulimit_nofile {
        let n = n.min(host_open_files());
        args.extend(["--ulimit".into(), format!("nofile={n}:{n}")]);
    }
    for cap in &s.cap_drop {
        args.extend(["--cap-drop".into(), cap.clone()]);
    }
    for opt in &s.security_opt {
        args.extend(["--security-opt".into(), opt.clone()]);
    }
    if let Some(limit) = s.mem_limit {
        args.extend(["--memory".into(), limit.to_string()]);
    }
    args
}

/// This host's hard limit of open files: no container may be given more (compose asks for
/// 1,048,576; some hosts, this project's test machines among them, allow 20,000).
fn host_open_files() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(4)?.parse().ok()
        })
        .unwrap_or(u64::MAX)
}

/// Whether setting value `value` names host `host` (`host:port`, or a URL's `//host`), alone or
/// in a comma-separated list.
fn names_host(value: &str, host: &str) -> bool {
    value.split(',').any(|item| {
        let item = item.trim();
        let authority = item.split_once("//").map_or(item, |(_, rest)| rest);
        authority
            .strip_prefix(host)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
    })
}

/// The listeners of compose service `service`.
fn listeners(service: &str) -> &'static [&'static str] {
    LISTENERS
        .iter()
        .find(|(s, _)| *s == service)
        .map_or(&[], |(_, l)| l)
}

impl Stack {
    /// The containers of compose service `service`, one per replica, each with ports of its own.
    pub(super) fn plan(&self, service: &str) -> Vec<Container> {
        let s = self.compose.service(service);
        (0..s.replicas)
            .map(|i| Container {
                name: format!("{}-{service}-{}", self.run, i + 1),
                listens: listeners(service)
                    .iter()
                    .map(|k| ((*k).to_owned(), free_addr()))
                    .collect(),
            })
            .collect()
    }

    /// Compose service `service`'s settings for container `c`: compose.yaml's, with
    /// - each listener on 127.0.0.1 and the container's own port (not every address, port as
    ///   compose gives it: every container shares the host's network);
    /// - each compose host name replaced by what stands for it here ([`Stack::up`]);
    /// - the admission key's id and public keys from compose-secrets.sh's `token.env`, as
    ///   compose's `env_file` reads them;
    /// - this run's Redis prefix, topic and consumer group (the machine's services are shared
    ///   with other tests), and the trusted proxies of [`StackOptions`].
    ///
    /// A compose host name left in a setting fails the test: a new dependency in compose.yaml
    /// must be given its stand-in here.
    pub fn settings(&self, service: &str, c: &Container) -> BTreeMap<String, String> {
        let s = self.compose.service(service);
        let mut env = s.environment.clone();
        for (key, addr) in &c.listens {
            env.insert(key.clone(), addr.to_string());
        }
        for value in env.values_mut() {
            for (host, here) in &self.hosts {
                *value = value.replace(host, here);
            }
        }
        if let Some(file) = &s.env_file {
            assert_eq!(file, "./secrets/token.env", "{service}'s env_file");
            let text = std::fs::read_to_string(self.secrets.join("token.env")).unwrap();
            for line in text.lines().filter(|l| l.contains('=')) {
                let (k, v) = line.split_once('=').unwrap();
                env.insert(k.to_owned(), v.to_owned());
            }
        }
        env.insert("FLOODGATE_REDIS_PREFIX".into(), self.prefix.clone());
        env.insert("FLOODGATE_RESERVATIONS_TOPIC".into(), self.topic.clone());
        env.insert(
            "FLOODGATE_CONSUMER_GROUP".into(),
            format!("{}-consumer", self.run),
        );
        env.insert(
            "FLOODGATE_TRUSTED_PROXIES".into(),
            self.options.trusted_proxies.clone(),
        );
        if !self.options.redis_cluster.is_empty() && env.contains_key("FLOODGATE_REDIS_URL") {
            env.insert(
                "FLOODGATE_REDIS_CLUSTER_NODES".into(),
                self.options.redis_cluster.join(","),
            );
        }
        for (key, value) in &env {
            for name in self.compose.names() {
                assert!(
                    !names_host(value, &name),
                    "{service}: {key}={value} names compose's {name}, which has no stand-in here"
                );
            }
        }
        env
    }

    /// `docker run` arguments for service `service`'s container `c`, detached or not.
    pub(super) fn run_args(&self, service: &str, c: &Container, detach: bool) -> Vec<String> {
        let s = self.compose.service(service);
        let mut args: Vec<String> = vec!["run".into()];
        if detach {
            args.push("--detach".into());
        } else {
            args.push("--rm".into());
        }
        args.extend([
            "--name".into(),
            c.name.clone(),
            "--label".into(),
            format!("floodgate-test={}", self.run),
            "--network".into(),
            "host".into(),
        ]);
        if s.read_only {
            args.push("--read-only".into());
        }
        args.extend(confinement(&s));
        args.extend(self.secret_volumes(&s));
        // Compose's named volumes, as volumes of this run (removed with it).
        for (volume, path, read_only) in &s.volumes {
            let mode = if *read_only { ":ro" } else { "" };
            args.extend([
                "--volume".into(),
                format!("{}{mode}", self.volume(volume, path)),
            ]);
        }
        for (k, v) in self.settings(service, c) {
            args.extend(["--env".into(), format!("{k}={v}")]);
        }
        args.push(self.docker.image.clone());
        args.extend(s.command.iter().cloned());
        args
    }

    /// The `--volume` argument mounting compose's named volume `volume` at `path`: a volume of
    /// this run's own, made (labelled, for [`Drop`]) the first time it is asked for.
    pub(super) fn volume(&self, volume: &str, path: &str) -> String {
        let name = format!("{}-{volume}", self.run);
        let exists = self
            .docker
            .run(&["volume", "inspect", &name])
            .status
            .success();
        if !exists {
            self.docker.ok(&[
                "volume",
                "create",
                "--label",
                &format!("floodgate-test={}", self.run),
                &name,
            ]);
        }
        format!("{name}:{path}")
    }

    /// Runs a one-off service (the migrations, the topics) to completion; it must succeed.
    pub(super) fn once(&self, service: &str) {
        let c = Container {
            name: format!("{}-{service}", self.run),
            listens: BTreeMap::new(),
        };
        let args = self.run_args(service, &c, false);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.docker.run(&args);
        assert!(
            out.status.success(),
            "{service}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts service `service`'s container `c`.
    pub fn start(&self, service: &str, c: &Container) {
        let args = self.run_args(service, c, true);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.docker.ok(&args);
    }

    /// The edge: compose's `cdn` service (its settings, read-only root and tmpfs) on the edge's
    /// image, in front of this run's gateways and booking instances.
    /// The `--volume` arguments that mount service `s`'s secrets as compose does: each file
    /// alone, read-only, at `/run/secrets/<name>`.
    fn secret_volumes(&self, s: &Service) -> Vec<String> {
        s.secrets
            .iter()
            .flat_map(|secret| {
                [
                    "--volume".to_owned(),
                    format!(
                        "{}:/run/secrets/{secret}:ro",
                        self.secrets.join(secret).display()
                    ),
                ]
            })
            .collect()
    }

    pub(super) fn start_edge(&self) {
        let s = self.compose.service("cdn");
        let mut env = s.environment.clone();
        let list = |cs: &[Container], key: &str| {
            cs.iter()
                .map(|c| c.listen(key).to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        env.insert("FLOODGATE_EDGE_LISTEN".into(), self.edge.to_string());
        env.insert(
            "FLOODGATE_EDGE_METRICS_LISTEN".into(),
            self.edge_metrics.to_string(),
        );
        env.insert(
            "FLOODGATE_EDGE_REDIRECT_LISTEN".into(),
            self.edge_redirect.to_string(),
        );
        env.insert(
            "FLOODGATE_EDGE_GATEWAYS".into(),
            list(&self.gateways, "FLOODGATE_GATEWAY_LISTEN"),
        );
        env.insert(
            "FLOODGATE_EDGE_BOOKING".into(),
            list(&self.bookings, "FLOODGATE_BOOKING_LISTEN"),
        );
        let mut args: Vec<String> = [
            "run",
            "--detach",
            "--name",
            &self.edge_name(),
            "--label",
            &format!("floodgate-test={}", self.run),
            "--network",
            "host",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if s.read_only {
            args.push("--read-only".into());
        }
        args.extend(confinement(&s));
        args.extend(self.secret_volumes(&s));
        for (k, v) in env {
            args.extend(["--env".into(), format!("{k}={v}")]);
        }
        args.push(self.docker.edge_image.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.docker.ok(&args);
    }
}
