//! Shell completions and man pages, generated from the clap definitions the parser
//! uses, so that they name every subcommand and flag the binary accepts. Each binary
//! offers them as two hidden subcommands, `completions SHELL` and `man DIR`: the
//! packages are made with them, and an operator can make them anywhere.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgMatches, Command, value_parser};
use clap_complete::Shell;

/// The subcommand that prints a shell's completion script.
pub const COMPLETIONS: &str = "completions";
/// The subcommand that writes the man pages.
pub const MAN: &str = "man";

/// `command` with the two generators as hidden subcommands.
pub(crate) fn with_generators(command: Command) -> Command {
    command
        .subcommand(
            Command::new(COMPLETIONS)
                .hide(true)
                .about("Prints the completion script of a shell")
                .arg(Arg::new("shell").required(true).value_parser(value_parser!(Shell))),
        )
        .subcommand(
            Command::new(MAN)
                .hide(true)
                .about("Writes a man page for the binary and one for each subcommand into a directory")
                .arg(Arg::new("dir").value_name("DIR").required(true).value_parser(value_parser!(PathBuf))),
        )
}

/// Whether `subcommand` is one of the generators.
pub(crate) fn is_generator(subcommand: &str) -> bool {
    [COMPLETIONS, MAN].contains(&subcommand)
}

/// Completions or man pages of a command as documented.
#[derive(Debug)]
pub enum Manual {
    /// A shell's completion script.
    Completions {
        /// The command completed.
        command: Command,
        /// The shell.
        shell: Shell,
    },
    /// Man pages in section 1: `NAME.1` and `NAME-SUBCOMMAND.1` for each subcommand.
    Man {
        /// The command described.
        command: Command,
        /// Where the pages go (made if missing).
        dir: PathBuf,
    },
}

impl Manual {
    /// What the generator subcommand `name`, given `arguments`, asks of `command`.
    pub(crate) fn requested(command: Command, name: &str, arguments: &ArgMatches) -> Self {
        let required = "a generator's argument is required";
        match name {
            COMPLETIONS => Self::Completions { command, shell: *arguments.get_one("shell").expect(required) },
            _ => Self::Man { command, dir: arguments.get_one::<PathBuf>("dir").expect(required).clone() },
        }
    }

    /// Prints the completion script to `out`, or writes the man pages and lists them on
    /// `out`.
    pub fn write(self, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Self::Completions { mut command, shell } => {
                let name = command.get_name().to_owned();
                clap_complete::generate(shell, &mut command, name, out);
                Ok(())
            }
            Self::Man { command, dir } => {
                std::fs::create_dir_all(&dir)?;
                // Built, the subcommands know their pages' names (`xq-worker-connect`).
                let mut command = command.disable_help_subcommand(true);
                command.build();
                let mut pages = Vec::new();
                man_pages(command, &dir, &mut pages)?;
                pages.iter().try_for_each(|page| writeln!(out, "{}", page.display()))
            }
        }
    }
}

/// Writes the pages of `command` and its visible subcommands into `dir`, adding their
/// paths to `written`.
fn man_pages(command: Command, dir: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for subcommand in command.get_subcommands().filter(|subcommand| !subcommand.is_hide_set()) {
        man_pages(subcommand.clone(), dir, written)?;
    }
    written.push(clap_mangen::Man::new(command).generate_to(dir)?);
    Ok(())
}
