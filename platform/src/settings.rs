//! How a service's settings are read.
//!
//! Every setting is a flag with a `FLOODGATE_*` environment variable (clap's `Args`), described
//! once where it is declared; docs/settings.md is generated from those declarations.
//!
//! Every duration a service is given is a [`Duration`] from the moment its flags are parsed, so
//! no code converts milliseconds by hand; the names keep their unit (`FLOODGATE_TICK_MS=100`,
//! `--tick-ms 100`), as operators have always written them.
//!
//! [`by_name`] reads settings given by their variables' names, ignoring the process's own
//! environment: the tests build every service from the same declarations (and defaults) as
//! its binary does.

use std::time::Duration;

use clap::{Args, Command, FromArgMatches};

/// Parses a whole number of milliseconds (`clap`'s `value_parser` for `*_MS` settings).
pub fn millis(text: &str) -> Result<Duration, String> {
    whole(text, "milliseconds").map(Duration::from_millis)
}

/// Parses a whole number of seconds (`clap`'s `value_parser` for `*_SECS` settings).
pub fn secs(text: &str) -> Result<Duration, String> {
    whole(text, "seconds").map(Duration::from_secs)
}

fn whole(text: &str, unit: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("{text:?} is not a whole number of {unit}"))
}

/// Settings of type `T` from `(variable, value)` pairs (`("FLOODGATE_TICK_MS", "50")`), every
/// other setting at its default; the process's environment is not read. An unknown name, or a
/// value the setting refuses, is an error naming it.
pub fn by_name<T: Args + FromArgMatches>(pairs: &[(&str, String)]) -> Result<T, String> {
    let command = T::augment_args(Command::new("settings").no_binary_name(true));
    let mut argv = Vec::with_capacity(pairs.len());
    for (name, value) in pairs {
        let arg = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|env| env == *name))
            .ok_or_else(|| format!("{name} is not one of these settings"))?;
        let long = arg
            .get_long()
            .ok_or_else(|| format!("{name} has no flag"))?;
        if arg.get_action().takes_values() {
            argv.push(format!("--{long}={value}"));
        } else if matches!(value.as_str(), "true" | "1" | "yes" | "on") {
            // A switch (`FLOODGATE_PAYMENT_SANDBOX=true`): its flag alone.
            argv.push(format!("--{long}"));
        } else if !matches!(value.as_str(), "false" | "0" | "no" | "off" | "") {
            return Err(format!(
                "{name} is a switch: {value:?} is not true or false"
            ));
        }
    }
    // Each setting's variable forgotten: only the pairs count, whatever the process's environment.
    let mut command = command.mut_args(|a| a.env(None));
    let matches = command
        .try_get_matches_from_mut(argv)
        .map_err(|e| e.to_string())?;
    T::from_arg_matches(&matches).map_err(|e| e.to_string())
}

/// The settings `T` has when nothing is set.
pub fn defaults<T: Args + FromArgMatches>() -> T {
    by_name(&[]).expect("every setting without a default is optional")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Args)]
    struct Example {
        #[arg(long = "tick-ms", env = "FLOODGATE_EXAMPLE_TICK_MS", default_value = "100", value_parser = millis)]
        tick: Duration,
        #[arg(long, env = "FLOODGATE_EXAMPLE_NAME")]
        name: Option<String>,
        #[arg(long, env = "FLOODGATE_EXAMPLE_SWITCH")]
        switch: bool,
    }

    #[test]
    fn settings_by_name_take_the_pairs_and_the_defaults_only() {
        let example: Example = by_name(&[("FLOODGATE_EXAMPLE_TICK_MS", "50".into())]).unwrap();
        assert_eq!(example.tick, Duration::from_millis(50));
        assert_eq!(example.name, None);
        let example: Example = defaults();
        assert_eq!(example.tick, Duration::from_millis(100));
        assert!(!example.switch);
        let on: Example = by_name(&[("FLOODGATE_EXAMPLE_SWITCH", "true".into())]).unwrap();
        assert!(on.switch);
        let off: Example = by_name(&[("FLOODGATE_EXAMPLE_SWITCH", "false".into())]).unwrap();
        assert!(!off.switch);
        assert!(by_name::<Example>(&[("FLOODGATE_EXAMPLE_SWITCH", "maybe".into())]).is_err());
        let unknown = by_name::<Example>(&[("FLOODGATE_NOPE", "1".into())]).unwrap_err();
        assert!(unknown.contains("FLOODGATE_NOPE"), "{unknown}");
        let bad = by_name::<Example>(&[("FLOODGATE_EXAMPLE_TICK_MS", "soon".into())]).unwrap_err();
        assert!(bad.contains("soon"), "{bad}");
    }

    #[test]
    fn durations_read_their_unit_and_refuse_anything_else() {
        assert_eq!(millis("250"), Ok(Duration::from_millis(250)));
        assert_eq!(secs("3"), Ok(Duration::from_secs(3)));
        for bad in ["", "-1", "1.5", "5s", "ten"] {
            assert!(millis(bad).is_err(), "{bad:?}");
            assert!(secs(bad).is_err(), "{bad:?}");
        }
    }
}
