//! Every client's configuration, in the order the module says, against the properties a test
//! sets: the defaults, the file, the settings, the variables, and the properties refused.

use super::*;

fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    vars.iter().map(|(k, v)| (k.into(), v.into())).collect()
}

fn get(config: &ClientConfig, name: &str) -> Option<String> {
    config.get(name).map(str::to_owned)
}

#[test]
fn the_dead_letter_topic_follows_the_reservations_topic_unless_named() {
    let args = KafkaArgs::plaintext("k:9092", "sale-events");
    assert_eq!(args.dead_letter_topic(None), "sale-events.dlq");
    assert_eq!(args.dead_letter_topic(Some("parked")), "parked");
}

#[test]
fn later_sources_win_and_roles_read_only_their_own() {
    let dir = std::env::temp_dir().join(format!("fg-kafka-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client.properties");
    std::fs::write(
        &file,
        "# every client\nsecurity.protocol = sasl_plaintext\nlinger.ms=7\nsocket.timeout.ms=9000\n",
    )
    .unwrap();
    let mut args = KafkaArgs::plaintext("k1:9092,k2:9092", "t");
    args.kafka_properties_file = Some(file);
    args.kafka_sasl_username = Some("floodgate".into());
    args.kafka_sasl_password = Some(SecretString::from("pw".to_owned()));
    let vars = env(&[
        ("FLOODGATE_KAFKA_PRODUCER_LINGER_MS", "5"),
        ("FLOODGATE_KAFKA_CLIENT_LINGER_MS", "6"),
        ("FLOODGATE_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", "50"),
        ("FLOODGATE_KAFKA_PRODUCER_COMPRESSION_TYPE", "zstd"),
        ("UNRELATED", "x"),
    ]);
    let producer = args
        .client_with_env(Role::Producer, &[], vars.clone())
        .unwrap();
    assert_eq!(
        get(&producer, "linger.ms").as_deref(),
        Some("5"),
        "role beats all"
    );
    assert_eq!(get(&producer, "compression.type").as_deref(), Some("zstd"));
    assert_eq!(get(&producer, "acks").as_deref(), Some("all"));
    assert_eq!(get(&producer, "socket.timeout.ms").as_deref(), Some("9000"));
    assert_eq!(
        get(&producer, "security.protocol").as_deref(),
        Some("sasl_plaintext")
    );
    assert_eq!(
        get(&producer, "sasl.username").as_deref(),
        Some("floodgate")
    );
    assert_eq!(get(&producer, "sasl.password").as_deref(), Some("pw"));
    assert_eq!(
        get(&producer, "bootstrap.servers").as_deref(),
        Some("k1:9092,k2:9092")
    );
    assert_eq!(get(&producer, "fetch.wait.max.ms"), None);
    let consumer = args.client_with_env(Role::Consumer, &[], vars).unwrap();
    assert_eq!(get(&consumer, "fetch.wait.max.ms").as_deref(), Some("50"));
    assert_eq!(
        get(&consumer, "linger.ms").as_deref(),
        Some("6"),
        "every-client variable"
    );
    assert_eq!(
        get(&consumer, "enable.auto.commit").as_deref(),
        Some("false")
    );
    assert_eq!(get(&consumer, "acks"), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_an_invariant_rests_on_cannot_be_set_from_outside() {
    let args = KafkaArgs::plaintext("k:9092", "t");
    for (var, property) in [
        ("FLOODGATE_KAFKA_PRODUCER_ACKS", "acks"),
        (
            "FLOODGATE_KAFKA_PRODUCER_ENABLE_IDEMPOTENCE",
            "enable.idempotence",
        ),
        (
            "FLOODGATE_KAFKA_CONSUMER_ENABLE_AUTO_COMMIT",
            "enable.auto.commit",
        ),
        (
            "FLOODGATE_KAFKA_CLIENT_BOOTSTRAP_SERVERS",
            "bootstrap.servers",
        ),
        ("FLOODGATE_KAFKA_CLIENT_SASL_PASSWORD", "sasl.password"),
    ] {
        let role = if var.contains("CONSUMER") {
            Role::Consumer
        } else {
            Role::Producer
        };
        let err = args
            .client_with_env(role, &[], env(&[(var, "1")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(property) && err.contains("cannot be changed"),
            "{err}"
        );
    }
    let own = [("message.timeout.ms", "30000".to_owned())];
    let err = args
        .client_with_env(
            Role::Producer,
            &own,
            env(&[("FLOODGATE_KAFKA_PRODUCER_MESSAGE_TIMEOUT_MS", "1")]),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("message.timeout.ms"), "{err}");
    let ok = args
        .client_with_env(Role::Producer, &own, env(&[]))
        .unwrap();
    assert_eq!(get(&ok, "message.timeout.ms").as_deref(), Some("30000"));
}

#[test]
fn sasl_defaults_to_scram_sha_512_and_files_are_checked() {
    let mut args = KafkaArgs::plaintext("k:9092", "t");
    args.kafka_security_protocol = Some("sasl_ssl".into());
    let config = args.client_with_env(Role::Admin, &[], env(&[])).unwrap();
    assert_eq!(
        get(&config, "sasl.mechanism").as_deref(),
        Some("SCRAM-SHA-512")
    );
    assert_eq!(
        get(&config, "linger.ms"),
        None,
        "an admin client takes no role defaults"
    );
    assert!(parse_properties("a=b\nbroken\n")
        .unwrap_err()
        .contains("line 2"));
    assert_eq!(
        parse_properties("sasl.oauthbearer.config = a=b c\n").unwrap(),
        vec![("sasl.oauthbearer.config".to_owned(), "a=b c".to_owned())]
    );
    args.kafka_properties_file = Some("/nonexistent/client.properties".into());
    let err = args
        .client_with_env(Role::Admin, &[], env(&[]))
        .unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");
}

#[test]
fn help_shows_the_defaults_the_code_applies() {
    let help = help();
    for (k, v) in PRODUCER_DEFAULTS
        .iter()
        .chain(CONSUMER_DEFAULTS)
        .chain(ADMIN_DEFAULTS)
    {
        assert!(
            help.contains(&format!("{k}={v}")),
            "{k} missing from {help}"
        );
    }
}

/// No client of Floodgate's makes a topic by asking about it: on a broker with
/// `auto.create.topics.enable` (Apache Kafka's default), librdkafka's producer would otherwise
/// have the booking service's look at a missing probe topic make it with the broker's defaults
/// (one replica), and `topics ensure` would then find it short of the replicas the settings ask.
#[test]
fn no_client_makes_a_topic_by_asking_about_it() {
    let args = KafkaArgs::plaintext("k:9092", "t");
    for role in [Role::Producer, Role::Consumer, Role::Admin] {
        let config = args.client_with_env(role, &[], env(&[])).unwrap();
        assert_eq!(
            config.get("allow.auto.create.topics"),
            Some("false"),
            "{role:?}"
        );
    }
}
