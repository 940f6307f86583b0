//! PLACEHOLDER: `skoop collect local` is wired here.
use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum CollectCommand {}

pub fn run(command: CollectCommand) -> ExitCode {
    match command {}
}
