//! The command line as the cluster's binaries read it: clap's parse of their definitions
//! with two additions, each made once here for every binary. Subcommands that run a
//! service take `--config FILE`, a TOML file of their flags beneath the command line
//! ([`config`]); and every binary has two hidden subcommands, `completions SHELL` and
//! `man DIR`, that generate its shell completions and man pages from the definitions the
//! parser itself uses ([`manuals`]), so that they cannot fall behind the flags.

pub mod config;
pub mod manuals;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command, Parser};

pub use config::ConfigError;
pub use manuals::Manual;

/// The name of the argument, and of the flag, naming a configuration file.
pub const CONFIG: &str = "config";

/// What a command line asks of a binary.
#[derive(Debug)]
pub enum Invocation {
    /// Its work, with these arguments: the command line's over the configuration file's.
    Run(ArgMatches),
    /// Its completions or man pages (boxed: a command is large, and rarely wanted).
    Generate(Box<Manual>),
}

/// Why a command line was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Clap's refusal (or its `--help` and `--version`), to be shown by [`clap::Error::exit`].
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// The configuration file's.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// `command` as it is documented: with `--config FILE` on each subcommand named in
/// `configurable`.
pub fn documented(command: Command, configurable: &[&str]) -> Command {
    configurable.iter().fold(command, |command, name| {
        command.mut_subcommand(name, |subcommand| {
            subcommand.arg(
                Arg::new(CONFIG).long(CONFIG).value_name("FILE").value_parser(clap::value_parser!(PathBuf)).help(
                    "A TOML file of this command's flags, keyed by their long names (listen = \"0.0.0.0:7420\", \
                         allow-plaintext = true); flags on the command line win over it",
                ),
            )
        })
    })
}

/// Parses `args` (the binary's name first) against `command`, reading the configuration
/// file a subcommand in `configurable` names with `--config`.
///
/// The file's settings become the arguments their flags would be, placed after the
/// subcommand, and the whole is parsed by clap as if typed: the file's values are
/// checked as the flags' are. A setting is left out when its flag is on the command
/// line, or set by its environment variable, or conflicts with a flag that is: the
/// command line wins, then the environment, then the file, then the defaults.
pub fn try_parse_from<I, T>(command: Command, configurable: &[&str], args: I) -> Result<Invocation, Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let documented = documented(command, configurable);
    let strict = manuals::with_generators(documented.clone());
    // A file may hold what the command line must otherwise give (--data, --token): the
    // command line is read first with those arguments optional, to find the file and
    // to see which flags it gives.
    let relaxed = configurable.iter().fold(strict.clone(), |command, name| {
        command.mut_subcommand(name, |subcommand| subcommand.mut_args(|arg| arg.required(false)))
    });
    let given = match relaxed.clone().try_get_matches_from(&args) {
        Ok(given) => given,
        // The strict parse says what is wrong, and renders `--help` with what is required.
        Err(relaxed_error) => return Err(strict.try_get_matches_from(&args).err().unwrap_or(relaxed_error).into()),
    };
    match given.subcommand() {
        Some((name, generator)) if manuals::is_generator(name) => {
            return Ok(Invocation::Generate(Box::new(Manual::requested(documented, name, generator))));
        }
        Some((name, given)) if configurable.contains(&name) => {
            if let Some(file) = given.get_one::<PathBuf>(CONFIG) {
                let subcommand = relaxed.find_subcommand(name).expect("a configurable subcommand is defined");
                let settings = config::arguments(file, subcommand, |id| {
                    matches!(given.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable))
                })?;
                // Right after the subcommand's name: before any `--` that ends the flags.
                // The binaries have no top-level options that take a value, so the first
                // word equal to the name is the subcommand.
                let at = args.iter().skip(1).position(|word| word == name).expect("the subcommand was given") + 2;
                args.splice(at..at, settings);
            }
        }
        _ => {}
    }
    Ok(Invocation::Run(strict.try_get_matches_from(args)?))
}

/// This process's command line as [`try_parse_from`] reads it, exiting as clap's own
/// parse does after `--help`, `--version` or a refusal, and after generating manuals.
pub fn matches(command: Command, configurable: &[&str]) -> ArgMatches {
    let name = command.get_name().to_owned();
    match try_parse_from(command, configurable, std::env::args_os()) {
        Ok(Invocation::Run(matches)) => matches,
        Ok(Invocation::Generate(manual)) => match manual.write(&mut std::io::stdout().lock()) {
            Ok(()) => std::process::exit(0),
            Err(error) => {
                eprintln!("{name}: {error}");
                std::process::exit(1)
            }
        },
        Err(Error::Clap(error)) => error.exit(),
        Err(Error::Config(error)) => {
            // Clap's exit status for a usage error: the file stands for arguments.
            eprintln!("{name}: {error}");
            std::process::exit(2)
        }
    }
}

/// [`matches`] turned into the binary's derived arguments.
pub fn parse<P: Parser>(configurable: &[&str]) -> P {
    let matches = matches(P::command(), configurable);
    P::from_arg_matches(&matches).unwrap_or_else(|error| error.format(&mut P::command()).exit())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::path::Path;

    use clap::{ArgAction, value_parser};

    use super::*;

    /// A service's command line in small: a required path, a number with a default, a
    /// switch and two switches that exclude each other.
    fn service() -> Command {
        Command::new("svc").subcommand_required(true).subcommand(
            Command::new("serve")
                .arg(Arg::new("data").long("data").required(true).value_parser(value_parser!(PathBuf)))
                .arg(
                    Arg::new("max_connections")
                        .long("max-connections")
                        .default_value("16")
                        .value_parser(value_parser!(u32)),
                )
                .arg(Arg::new("allow_plaintext").long("allow-plaintext").action(ArgAction::SetTrue))
                .arg(Arg::new("private").long("private").action(ArgAction::SetTrue).conflicts_with("public"))
                .arg(Arg::new("public").long("public").action(ArgAction::SetTrue)),
        )
    }

    /// A configuration file with `text`, removed when dropped.
    struct File(PathBuf);

    impl File {
        fn new(name: &str, text: &str) -> Self {
            let path = std::env::temp_dir().join(format!("xq-cli-{}-{name}.toml", std::process::id()));
            std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
            Self(path)
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn serve(file: &Path, flags: &[&str]) -> Result<ArgMatches, Error> {
        let mut args = vec!["svc", "serve", "--config", file.to_str().unwrap()];
        args.extend(flags);
        match try_parse_from(service(), &["serve"], args)? {
            Invocation::Run(matches) => Ok(matches.subcommand_matches("serve").unwrap().clone()),
            Invocation::Generate(manual) => panic!("asked to generate {manual:?}"),
        }
    }

    fn refusal(file: &Path, flags: &[&str]) -> String {
        serve(file, flags).unwrap_err().to_string()
    }

    #[test]
    fn the_file_sets_what_the_command_line_does_not() {
        let file = File::new("sets", "data = \"/srv/xq\"\nmax-connections = 20\nallow-plaintext = true\n");
        let matches = serve(&file.0, &[]).unwrap();
        assert_eq!(matches.get_one::<PathBuf>("data").unwrap(), Path::new("/srv/xq"));
        assert_eq!(matches.get_one::<u32>("max_connections"), Some(&20));
        assert!(matches.get_flag("allow_plaintext"));
    }

    #[test]
    fn a_flag_on_the_command_line_wins_over_the_file() {
        let file = File::new("wins", "data = \"/srv/xq\"\nmax-connections = 20\nprivate = true\n");
        let matches = serve(&file.0, &["--max-connections", "30", "--public"]).unwrap();
        assert_eq!(matches.get_one::<u32>("max_connections"), Some(&30));
        assert!(
            matches.get_flag("public") && !matches.get_flag("private"),
            "the file's conflicting switch is left out"
        );
        let file = File::new("wins-back", "data = \"/srv/xq\"\npublic = true\n");
        let matches = serve(&file.0, &["--private"]).unwrap();
        assert!(matches.get_flag("private") && !matches.get_flag("public"), "either side of a conflict is overridden");
    }

    #[test]
    fn false_leaves_a_switch_at_its_default() {
        let file = File::new("false", "data = \"/d\"\nallow-plaintext = false\n");
        assert!(!serve(&file.0, &[]).unwrap().get_flag("allow_plaintext"));
    }

    #[test]
    fn an_unknown_key_is_refused_by_name_and_file() {
        let file = File::new("unknown", "data = \"/d\"\nmax-conections = 3\n");
        let message = refusal(&file.0, &[]);
        assert!(message.contains("max-conections") && message.contains(&*file.0.to_string_lossy()), "{message}");
        let file = File::new("snake", "data = \"/d\"\nmax_connections = 3\n");
        let message = refusal(&file.0, &[]);
        assert!(message.contains("`max_connections`") && message.contains("`max-connections`"), "{message}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_by_name_and_file() {
        let name = |file: &File| file.0.to_string_lossy().into_owned();
        for (case, text, key) in [
            ("string-switch", "allow-plaintext = \"yes\"", "allow-plaintext"),
            ("switch-value", "max-connections = true", "max-connections"),
            ("not-a-number", "max-connections = \"lots\"", "--max-connections"),
            ("negative", "max-connections = -1", "--max-connections"),
            ("table", "[data]\npath = \"/d\"", "data"),
        ] {
            let file = File::new(case, text);
            let message = refusal(&file.0, &["--data", "/d"]);
            assert!(message.contains(key) && message.contains(&name(&file)), "{case}: {message}");
        }
    }

    #[test]
    fn the_file_may_not_name_another_file() {
        let file = File::new("nested", "data = \"/d\"\nconfig = \"/etc/other.toml\"\n");
        assert!(refusal(&file.0, &[]).contains("`config`"));
    }

    #[test]
    fn a_file_that_is_not_toml_or_not_there_is_refused_by_name() {
        let file = File::new("syntax", "data = \n");
        assert!(refusal(&file.0, &[]).contains(&*file.0.to_string_lossy()));
        let missing = std::env::temp_dir().join("xq-cli-no-such-file.toml");
        assert!(refusal(&missing, &[]).contains(&*missing.to_string_lossy()));
    }

    #[test]
    fn what_is_required_may_come_from_the_file_and_must_come_from_somewhere() {
        let file = File::new("required", "max-connections = 3\n");
        assert!(
            matches!(serve(&file.0, &[]), Err(Error::Clap(error)) if error.kind() == clap::error::ErrorKind::MissingRequiredArgument)
        );
        assert!(serve(&file.0, &["--data", "/d"]).is_ok());
    }
}
