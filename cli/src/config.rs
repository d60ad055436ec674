//! A configuration file: a TOML table of a subcommand's flags, keyed by their long names
//! as typed (`max-connections = 100` for `--max-connections 100`, `allow-plaintext =
//! true` for `--allow-plaintext`), turned into the arguments those flags would be.
//!
//! The arguments are `--name=value` words: a value that starts with a dash (a token)
//! stays a value. Clap then parses them as it parses the command line, so a value is
//! checked as the flag's is; they are first parsed alone, so that what clap refuses in
//! them is blamed on the file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::{Arg, ArgAction, Command};
use toml::Value;

use crate::CONFIG;

/// Why a configuration file was refused; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the configuration file {}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{}: {source}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// Where and why, as the TOML parser says it.
        source: toml::de::Error,
    },
    /// A key that names none of the subcommand's flags.
    #[error("{}: unknown key `{key}`{hint}", file.display())]
    UnknownKey {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// What was perhaps meant.
        hint: String,
    },
    /// A value TOML types differently from what its flag takes.
    #[error("{}: `{key}` {expected}, not {found}", file.display())]
    WrongType {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// What the flag takes.
        expected: &'static str,
        /// The TOML type given.
        found: &'static str,
    },
    /// A value its flag refuses, or settings that exclude each other, as clap says it.
    #[error("{}: {message}", file.display())]
    Refused {
        /// The file.
        file: PathBuf,
        /// Clap's reason, which names the flag.
        message: String,
    },
}

/// The arguments `file` stands for, as flags of `subcommand`, leaving out each setting
/// whose flag, or a flag it conflicts with, `given` says was given otherwise.
pub fn arguments(
    file: &Path,
    subcommand: &Command,
    given: impl Fn(&str) -> bool,
) -> Result<Vec<OsString>, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read { file: file.to_owned(), source })?;
    let table: toml::Table = text.parse().map_err(|source| ConfigError::Syntax { file: file.to_owned(), source })?;
    let mut arguments = Vec::new();
    for (key, value) in &table {
        let arg =
            subcommand.get_arguments().find(|arg| arg.get_long() == Some(key) && settable(arg)).ok_or_else(|| {
                ConfigError::UnknownKey { file: file.to_owned(), key: key.clone(), hint: hint(subcommand, key) }
            })?;
        let word = word(arg, value).map_err(|expected| ConfigError::WrongType {
            file: file.to_owned(),
            key: key.clone(),
            expected,
            found: value.type_str(),
        })?;
        let overridden = subcommand.get_arguments().any(|other| {
            given(other.get_id().as_str()) && (other.get_id() == arg.get_id() || conflict(subcommand, arg, other))
        });
        if let (Some(word), false) = (word, overridden) {
            arguments.push(word);
        }
    }
    // A value clap refuses, or two settings that exclude each other, is the file's
    // fault; what the file leaves for the command line to require (--tls-cert wants
    // --tls-key) may yet come from there.
    let alone = subcommand.clone().no_binary_name(true).mut_args(|arg| arg.required(false));
    match alone.try_get_matches_from(&arguments) {
        Err(error) if error.kind() != ErrorKind::MissingRequiredArgument => {
            Err(ConfigError::Refused { file: file.to_owned(), message: reason(&error) })
        }
        _ => Ok(arguments),
    }
}

/// Whether a file may set `arg`: a flag with a value, or a switch (`--help`,
/// `--version` and the file itself are not settings).
fn settable(arg: &Arg) -> bool {
    arg.get_id() != CONFIG && matches!(arg.get_action(), ArgAction::Set | ArgAction::Append | ArgAction::SetTrue)
}

/// Whether `a` and `b` exclude each other (clap records it on one of them).
fn conflict(subcommand: &Command, a: &Arg, b: &Arg) -> bool {
    let declared =
        |one: &Arg, other: &Arg| subcommand.get_arg_conflicts_with(one).iter().any(|x| x.get_id() == other.get_id());
    declared(a, b) || declared(b, a)
}

/// The argument `value` stands for, if any (a switch set false is left at its default,
/// off); or what the flag takes instead.
fn word(arg: &Arg, value: &Value) -> Result<Option<OsString>, &'static str> {
    let long = arg.get_long().expect("a settable flag has a long name");
    match (arg.get_action(), value) {
        (ArgAction::SetTrue, Value::Boolean(on)) => Ok(on.then(|| format!("--{long}").into())),
        (ArgAction::SetTrue, _) => Err("is a switch: true or false"),
        (_, Value::String(text)) => Ok(Some(format!("--{long}={text}").into())),
        (_, Value::Integer(number)) => Ok(Some(format!("--{long}={number}").into())),
        (_, Value::Float(number)) => Ok(Some(format!("--{long}={number}").into())),
        _ => Err("takes one value: a string or a number"),
    }
}

/// What may have been meant by the unknown `key`.
fn hint(subcommand: &Command, key: &str) -> String {
    let dashed = key.replace('_', "-");
    if key == CONFIG {
        " (a configuration file cannot name another)".to_owned()
    } else if dashed != key && subcommand.get_arguments().any(|arg| arg.get_long() == Some(&dashed) && settable(arg)) {
        format!(" (keys are spelt as the flags are: `{dashed}`)")
    } else {
        format!(" (the keys are the long names of the flags of `{}`)", subcommand.get_name())
    }
}

/// Clap's reason for refusing, in one line without its `error: ` prefix.
fn reason(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let line = rendered.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}
