//! Secrets from files, the convention of container platforms (Kubernetes and Docker mount a
//! secret as a file): every secret setting (an argument whose environment value is hidden)
//! also reads `<ITS ENV VAR>_FILE`, the path of a file holding the value. The value never
//! passes through the environment or the command line, so it cannot show in `ps`, in a crash
//! dump of the environment, or in `--help`.

use std::ffi::OsString;

/// Parses the process's arguments into `T` as `T::parse()` does (printing help or an error and
/// exiting), with every secret setting also taken from a file named by `<ENV>_FILE` (see the
/// module's notes). Both the variable and its `_FILE` set, an unreadable or empty file: an
/// error naming the setting.
pub fn parse_with_secret_files<T: clap::Parser>() -> T {
    parse_from_with_secret_files(std::env::args_os(), |name| std::env::var_os(name))
        .unwrap_or_else(|e| e.exit())
}

/// [`parse_with_secret_files`] over given arguments and environment, without exiting.
pub fn parse_from_with_secret_files<T: clap::Parser>(
    args: impl IntoIterator<Item = OsString>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<T, clap::Error> {
    let command = with_kafka_help(T::command());
    let command = with_secret_files(command, &env)
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))?;
    let matches = command
        .clone()
        .try_get_matches_from(args)
        .map_err(|e| naming_settings(&command, e))?;
    T::from_arg_matches(&matches)
}

/// A missing required argument, named also as the setting a deployment sets: in a container
/// `--token-key-id` is `FLOODGATE_TOKEN_KEY_ID` (or, for a secret, its `_FILE`).
fn naming_settings(command: &clap::Command, error: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::MissingRequiredArgument {
        return error;
    }
    let Some(ContextValue::Strings(missing)) = error.get(ContextKind::InvalidArg) else {
        return error;
    };
    let mut settings = std::collections::BTreeMap::new();
    collect_settings(command, &mut settings);
    let names: Vec<String> = missing
        .iter()
        .filter_map(|m| settings.get(m.split_whitespace().next()?.trim_start_matches("--")))
        .cloned()
        .collect();
    if names.is_empty() {
        return error;
    }
    let said = error.render().to_string();
    let said = said.trim_start_matches("error: ").trim_end();
    clap::Error::raw(
        ErrorKind::MissingRequiredArgument,
        format!("{said}\n\nIn the environment: {}\n", names.join(", ")),
    )
}

/// Each argument's long name and the setting that gives it, over the whole command tree.
fn collect_settings(
    command: &clap::Command,
    settings: &mut std::collections::BTreeMap<String, String>,
) {
    for arg in command.get_arguments() {
        let (Some(long), Some(env)) = (arg.get_long(), arg.get_env().and_then(|e| e.to_str()))
        else {
            continue;
        };
        let setting = if arg.is_hide_env_values_set() {
            format!("{env} (or {env}_FILE)")
        } else {
            env.to_owned()
        };
        settings.insert(long.to_owned(), setting);
    }
    for sub in command.get_subcommands() {
        collect_settings(sub, settings);
    }
}

/// A binary that talks to Kafka ends its `--help` with how any librdkafka property passes
/// through and Floodgate's defaults ([`crate::kafka::help`]), for each command that has the
/// Kafka settings.
fn with_kafka_help(mut command: clap::Command) -> clap::Command {
    if command
        .get_arguments()
        .any(|a| a.get_id() == "kafka_brokers")
    {
        command = command.after_long_help(crate::kafka::help());
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, with_kafka_help);
    }
    command
}

fn with_secret_files(
    mut command: clap::Command,
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<clap::Command, String> {
    let secrets: Vec<(clap::Id, String)> = command
        .get_arguments()
        .filter(|a| a.is_hide_env_values_set())
        .filter_map(|a| Some((a.get_id().clone(), a.get_env()?.to_str()?.to_owned())))
        .collect();
    for (id, var) in secrets {
        let file_var = format!("{var}_FILE");
        let Some(path) = env(&file_var) else {
            continue;
        };
        if env(&var).is_some() {
            return Err(format!(
                "{var} and {file_var} are both set: set one of them"
            ));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{file_var}: cannot read {}: {e}", path.to_string_lossy()))?;
        // A file written by `echo` ends with a newline that is not part of the secret.
        let value = text.trim_end_matches(['\n', '\r']);
        if value.is_empty() {
            return Err(format!("{file_var}: {} is empty", path.to_string_lossy()));
        }
        // The arguments live for the whole process, as the parsed settings do.
        let value: &'static str = Box::leak(value.to_owned().into_boxed_str());
        command = command.mut_arg(id, |arg| {
            arg.default_value(value)
                .hide_default_value(true)
                .required(false)
        });
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        let sub = command
            .find_subcommand(&name)
            .cloned()
            .ok_or_else(|| format!("subcommand {name}"))?;
        let sub = with_secret_files(sub, env)?;
        command = command.mut_subcommand(name, |_| sub);
    }
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        Serve {
            #[arg(long, env = "T_SECRET", hide_env_values = true)]
            secret: String,
            #[arg(long, env = "T_PLAIN", default_value = "p")]
            plain: String,
        },
    }

    /// Parses `t serve <args>` with `env` as the only environment `_FILE` lookups see (clap
    /// itself reads the real one, where these names are unset).
    fn parse_args(args: &[&str], env: &[(&str, &str)]) -> Result<Cli, String> {
        let env: Vec<(String, OsString)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        let argv = ["t", "serve"].iter().chain(args).map(OsString::from);
        parse_from_with_secret_files(argv, |name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
        .map_err(|e| e.to_string())
    }

    fn parse(env: &[(&str, &str)]) -> Result<Cli, String> {
        parse_args(&[], env)
    }

    fn secret(cli: &Cli) -> &str {
        let Sub::Serve { secret, .. } = &cli.command;
        secret
    }

    #[test]
    fn a_secret_comes_from_its_file_and_only_secrets_do() {
        let dir = std::env::temp_dir().join(format!("fg-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret");
        std::fs::write(&file, "s3cret-from-a-file\n").unwrap();
        let path = file.to_str().unwrap();
        let cli = parse(&[("T_SECRET_FILE", path)]).unwrap();
        assert_eq!(
            secret(&cli),
            "s3cret-from-a-file",
            "the trailing newline is dropped"
        );
        // Not both at once, and not an empty or missing file.
        let both = parse(&[("T_SECRET_FILE", path), ("T_SECRET", "x")]).unwrap_err();
        assert!(both.contains("both set"), "{both}");
        std::fs::write(&file, "\n").unwrap();
        assert!(parse(&[("T_SECRET_FILE", path)])
            .unwrap_err()
            .contains("is empty"));
        let missing = parse(&[("T_SECRET_FILE", "/nonexistent/secret")]).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
        // A plain setting does not read a file; a flag still wins over a file.
        std::fs::write(&file, "from-file").unwrap();
        let cli = parse_args(&["--secret", "flag"], &[("T_PLAIN_FILE", path)]).unwrap();
        let Sub::Serve { plain, secret } = &cli.command;
        assert_eq!((plain.as_str(), secret.as_str()), ("p", "flag"));
        let cli = parse_args(&["--secret", "flag"], &[("T_SECRET_FILE", path)]).unwrap();
        assert_eq!(self::secret(&cli), "flag");
        // Without either, the setting is still required, and named as a deployment sets it.
        let missing = parse(&[]).unwrap_err();
        assert!(
            missing.contains("--secret") && missing.contains("T_SECRET (or T_SECRET_FILE)"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
