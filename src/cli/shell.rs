//! What a shell and `man` need of skoop, made from the same clap
//! definition as the parser, so that they cannot drift from it:
//! `skoop completions SHELL` and `skoop man [COMMAND...]`.

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, EXIT_USAGE, write_raw};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (`diagnose`, `route lookup`); without
    /// it, skoop(1), which lists them.
    command: Vec<String>,
}

pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "skoop", &mut script);
    write_raw(&String::from_utf8_lossy(&script));
    ExitCode::SUCCESS
}

pub fn man(args: ManArgs) -> ExitCode {
    let mut command = Cli::command();
    command.build();
    let mut name = vec!["skoop".to_string()];
    for word in &args.command {
        let Some(sub) = command.find_subcommand(word).cloned() else {
            let known: Vec<&str> = command
                .get_subcommands()
                .map(|sub| sub.get_name())
                .filter(|name| *name != "help")
                .collect();
            err!(
                "error: {} has no command {word:?}; it has: {}",
                name.join(" "),
                known.join(", ")
            );
            return ExitCode::from(EXIT_USAGE);
        };
        name.push(word.clone());
        command = sub;
    }
    let mut page = Vec::new();
    // A command's page is titled `skoop-route-lookup`, as git's are.
    let man = clap_mangen::Man::new(command).title(name.join("-"));
    if let Err(e) = man.render(&mut page) {
        err!("error: cannot write the manual page: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    write_raw(&String::from_utf8_lossy(&page));
    ExitCode::SUCCESS
}
