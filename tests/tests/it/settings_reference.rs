//! docs/settings.md, every setting of every service, generated from the declarations the
//! binaries parse (their flags, variables, defaults and descriptions): a setting added, removed
//! or redescribed in the code and not in the reference fails here. `FLOODGATE_WRITE_SETTINGS=1`
//! writes the file (after a change to a setting, run this test with it and commit the result).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use clap::{Arg, Args, Command};
use floodgate_platform::identity::IdentityArgs;
use floodgate_platform::listener::ListenerArgs;
use floodgate_platform::runtime::{DatabaseArgs, KafkaArgs, RedisArgs};
use floodgate_tests::containers::repo;

/// A section of the reference: its title, what it says first, and its settings.
struct Section {
    title: &'static str,
    intro: &'static str,
    command: Command,
}

fn section<T: Args>(title: &'static str, intro: &'static str) -> Section {
    Section {
        title,
        intro,
        command: T::augment_args(Command::new(title)),
    }
}

/// The settings several services share come first, once; each service's section lists only
/// its own.
fn sections() -> Vec<Section> {
    vec![
        section::<RedisArgs>(
            "Redis",
            "The gateway, the booking service and the admin commands.",
        ),
        section::<DatabaseArgs>(
            "PostgreSQL",
            "The booking service, the consumer and the admin commands.",
        ),
        section::<KafkaArgs>(
            "Kafka",
            "The booking service, the consumer and `topics ensure` (docs/deploy.md, \"Kafka clients\").",
        ),
        section::<IdentityArgs>(
            "Signed-in buyers",
            "The gateway and the booking service: both check the buyer's identity token the same way.",
        ),
        section::<ListenerArgs>(
            "Public listeners",
            "The gateway's and the booking service's public listener (the admin listeners keep the defaults, with a small connection cap).",
        ),
        section::<floodgate_platform::clients::ClientArgs>(
            "Client addresses",
            "The gateway and the booking service: who a request is from, as their per-address limits count it (docs/runbook.md, \"Per-address limits\").",
        ),
        section::<floodgate_platform::origins::OriginArgs>(
            "Origins",
            "The gateway and the booking service: which web pages may use them from a browser (docs/runbook.md, \"Origins\").",
        ),
        section::<floodgate_platform::service::DrainArgs>(
            "Stopping",
            "The gateway and the booking service (the consumer has a setting of its own, below).",
        ),
        section::<floodgate_gateway::Config>("Gateway", "`floodgate-gateway serve`."),
        section::<floodgate_booking::Config>("Booking service", "`floodgate-booking serve`."),
        section::<floodgate_consumer::Config>("Consumer", "`floodgate-consumer`."),
        section::<floodgate_sandbox::SandboxConfig>(
            "Sandbox",
            "`floodgate-sandbox`, the stand-in payment provider and sign-in for demos and tests; never in a real sale.",
        ),
    ]
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn row(arg: &Arg) -> String {
    let env = arg.get_env().unwrap().to_string_lossy().into_owned();
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let default: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let default = if default.is_empty() {
        "(none)".to_owned()
    } else {
        format!("`{}`", default.join(","))
    };
    let secret = if arg.is_hide_env_values_set() {
        " (secret: also read from the file `<VAR>_FILE` names)"
    } else {
        ""
    };
    format!(
        "| `{env}` | {default} | {}{secret} |\n",
        escape(help.trim())
    )
}

/// The reference as the code declares it.
fn reference() -> String {
    let mut text = String::from(
        "# Settings\n\n\
         Every setting of every Floodgate service, as an environment variable (each is also a \
         flag: `FLOODGATE_TICK_MS` is `--tick-ms`). Generated from the declarations the \
         binaries parse, by `tests/tests/it/settings_reference.rs`: do not edit by hand.\n\n\
         Every binary also reads `FLOODGATE_LOG_JSON` (log JSON lines) and `RUST_LOG`; a \
         secret setting may come from a file instead (`FLOODGATE_X_FILE=/run/secrets/x`). \
         Durations are whole numbers in the unit their name ends with (`_MS`, `_SECS`).\n",
    );
    let mut seen = BTreeSet::new();
    for section in sections() {
        let own: Vec<&Arg> = section
            .command
            .get_arguments()
            .filter(|a| a.get_env().is_some())
            .filter(|a| !seen.contains(&a.get_env().unwrap().to_os_string()))
            .collect();
        let _ = write!(
            text,
            "\n## {}\n\n{}\n\n| Variable | Default | What it does |\n|---|---|---|\n",
            section.title, section.intro
        );
        for arg in &own {
            text.push_str(&row(arg));
        }
        for arg in own {
            seen.insert(arg.get_env().unwrap().to_os_string());
        }
    }
    text
}

#[test]
fn the_settings_reference_is_what_the_code_declares() {
    let made = reference();
    let path = repo().join("docs/settings.md");
    if std::env::var("FLOODGATE_WRITE_SETTINGS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &made).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == made,
        "docs/settings.md is not what the code declares: refresh it with \
         FLOODGATE_WRITE_SETTINGS=1 cargo nextest run -E \
         'test(the_settings_reference_is_what_the_code_declares)'"
    );
}

/// Every setting of a service is in the reference, the ones shared included: nothing is
/// documented only in `--help`.
#[test]
fn every_setting_of_every_service_is_in_the_reference() {
    let reference = std::fs::read_to_string(repo().join("docs/settings.md")).unwrap();
    for section in sections() {
        for arg in section.command.get_arguments() {
            let Some(env) = arg.get_env() else { continue };
            let env = env.to_string_lossy();
            assert!(
                reference.contains(&format!("| `{env}` |")),
                "{env} ({}) is not in docs/settings.md",
                section.title
            );
        }
    }
}
