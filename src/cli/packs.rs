//! `skoop packs ...`: list, show, lint, test and create rule packs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use skoop::pack_tests;
use skoop::packs::{
    self, HOOKS, IntRange, LoadedPacks, Override, Pack, PackKind, contract, scaffold,
};
use skoop::snapshot::ClusterFrom;

use super::args::{CacheArgs, LoadArgs};
use super::{EXIT_USAGE, OutputFormat, report_problems};

mod eval;
use eval::eval;

#[derive(Debug, Subcommand)]
pub enum PacksCommand {
    /// List the packs: the built-in ones and those under --pack-path.
    List(LoadArgs),
    /// Show one pack: parameters, modes, hooks and checks with their ids.
    Show {
        /// The pack's name.
        name: String,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Load pack directories and print every problem as file:line:col: message.
    ///
    /// Exit status: 0 when every pack loads cleanly, 1 when problems were found.
    Lint {
        /// Pack directories (or directories of packs).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Override a parameter: PACK.PARAM=VALUE (validated like any value).
        #[arg(long = "set", value_name = "PACK.PARAM=VALUE", value_parser = Override::parse)]
        overrides: Vec<Override>,
    },
    /// Run each pack's tests/<case>/: a snapshot and the finding ids expected.
    ///
    /// Exit status: 0 when every case passes, 1 when one fails, 2 when the
    /// tests cannot be run.
    Test {
        /// Pack directories (or directories of packs).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Show what each case reported (its findings, each flow's
        /// disposition and findings) beside what it expected.
        #[arg(short, long)]
        verbose: bool,
        /// Override a parameter of a pack under test in every case:
        /// PACK.PARAM=VALUE (a case's own `set:` wins for its case).
        #[arg(long = "set", value_name = "PACK.PARAM=VALUE", value_parser = Override::parse)]
        overrides: Vec<Override>,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Run a pack's checks over a snapshot and print every check, what it
    /// reported, and what its scripts printed.
    ///
    /// For writing a pack: each check with the subjects it ran on, every
    /// finding (failed, cannot tell, or script error) with its evidence,
    /// expected value and remediation, and the lines its scripts printed
    /// with `print` and `debug` (shown nowhere else). A CNI pack runs
    /// whether or not its detection finds its CNI; the output says which.
    /// Hop checks need a path: `skoop diagnose --pack-path DIR` runs them.
    ///
    ///   skoop packs eval plugins/flannel --snapshot examples/flannel-vxlan
    ///   skoop packs eval my-pack -s snap --node node-1 --set my-pack.mtu=1400
    ///
    /// Exit status: 0 when no check failed or broke, 1 when one reported a
    /// failure or a script error, 2 when the pack or the snapshot cannot be
    /// used.
    Eval(EvalArgs),
    /// Create a new pack in ./NAME whose own tests pass.
    New {
        name: String,
        #[arg(long, value_enum)]
        kind: Kind,
        /// Where to create it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The pack directory (or a directory of packs) whose checks run.
    dir: PathBuf,
    /// The snapshot directory to run them over.
    #[arg(short, long, value_name = "DIR", env = "SKOOP_SNAPSHOT")]
    snapshot: PathBuf,
    /// Only what is about this node: its checks (per remote node, with every
    /// peer), its pods' checks, and its Node object's.
    #[arg(long, value_name = "NAME", conflicts_with = "pod")]
    node: Option<String>,
    /// Only what is about this pod: its checks and its Pod object's.
    #[arg(long, value_name = "NS/NAME")]
    pod: Option<String>,
    /// Override a parameter: PACK.PARAM=VALUE (validated like any value).
    #[arg(long = "set", value_name = "PACK.PARAM=VALUE", value_parser = Override::parse)]
    overrides: Vec<Override>,
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    /// A CNI's behaviour: detection, modes, intent, hooks, checks.
    Cni,
    /// CNI-independent checks.
    Rules,
}

pub fn run(command: PacksCommand) -> ExitCode {
    match command {
        PacksCommand::List(load) => list(&load),
        PacksCommand::Show { name, load } => show(&name, &load),
        PacksCommand::Lint { dirs, overrides } => lint(&dirs, &overrides),
        PacksCommand::Test {
            dirs,
            verbose,
            overrides,
            cache,
        } => test(&dirs, verbose, &overrides, cache.cluster_from()),
        PacksCommand::Eval(args) => eval(&args),
        PacksCommand::New { name, kind, dir } => new(&name, kind, dir),
    }
}

fn list(load: &LoadArgs) -> ExitCode {
    let loaded = match load.load() {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    for pack in loaded.packs() {
        let origin = if pack.builtin {
            "built-in".to_owned()
        } else {
            pack.dir.display().to_string()
        };
        let declarative = pack.checks.iter().filter(|c| c.kind.is_declarative());
        // A composed pack's parts lend it checks (`composes:`).
        let lent: Vec<String> = (pack.composes.iter())
            .map(|part| {
                let count = (loaded.get(&part.pack).into_iter())
                    .flat_map(|p| &p.checks)
                    .filter(|check| part.lends(&check.id))
                    .count();
                format!("{count} of {}'s", part.pack)
            })
            .collect();
        let lent = if lent.is_empty() {
            String::new()
        } else {
            format!(" + {}", lent.join(", "))
        };
        out!(
            "{:<16} {:<8} {:<6} {:>3} checks ({:>2} declarative){lent}  {}  ({origin})",
            pack.name,
            pack.version.to_string(),
            pack.kind.as_str(),
            pack.checks.len(),
            declarative.count(),
            pack.description
        );
    }
    ExitCode::SUCCESS
}

fn show(name: &str, load: &LoadArgs) -> ExitCode {
    let loaded = match load.load() {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let Some(pack) = loaded.get(name) else {
        let names: Vec<&str> = loaded.packs().iter().map(|p| p.name.as_str()).collect();
        err!(
            "error: no pack is called {name} (packs: {})",
            names.join(", ")
        );
        return ExitCode::from(EXIT_USAGE);
    };
    for line in describe(pack).trim_end().lines() {
        out!("{line}");
    }
    ExitCode::SUCCESS
}

/// `skoop packs show`: everything a user needs to use and configure a pack.
fn describe(pack: &Pack) -> String {
    let mut out = format!(
        "{} {} ({} pack, engine {}, contract {})\n{}\nfrom: {}\n",
        pack.name,
        pack.version,
        pack.kind.as_str(),
        pack.engine,
        pack.contract,
        pack.description,
        if pack.builtin {
            "built-in".to_owned()
        } else {
            pack.dir.display().to_string()
        }
    );
    if !pack.parameters.is_empty() {
        out.push_str("\nparameters:\n");
        for p in &pack.parameters {
            let mut allowed = if p.allowed.is_empty() {
                String::new()
            } else {
                let values: Vec<String> = p.allowed.iter().map(ToString::to_string).collect();
                format!(" (allowed: {})", values.join(", "))
            };
            if p.range != IntRange::default() {
                allowed.push_str(&format!(" ({})", p.range));
            }
            let overridden = if p.value == p.default {
                String::new()
            } else {
                format!(", set to {}", p.value)
            };
            out.push_str(&format!(
                "  {}: {} = {}{overridden}{allowed}\n      {}\n",
                p.name,
                p.param_type.as_str(),
                p.default,
                p.doc
            ));
        }
    }
    if !pack.modes.is_empty() {
        out.push_str("\nmodes:\n");
        for m in &pack.modes {
            let when = m
                .when
                .as_ref()
                .map(|w| format!(" when {}", w.source))
                .unwrap_or_default();
            out.push_str(&format!("  {}{when}\n      {}\n", m.name, m.doc));
        }
    }
    if !pack.hooks.is_empty() {
        out.push_str("\nhooks:\n");
        for (hook, function) in &pack.hooks {
            let params = HOOKS
                .iter()
                .find(|h| h.name == hook)
                .map(|h| h.params.join(", "))
                .unwrap_or_default();
            out.push_str(&format!("  {hook}({params}) -> {}\n", function.name));
        }
    }
    if !pack.composes.is_empty() {
        out.push_str(
            "\ncomposes (where this pack applies, these lend it their checks, run with their own parameters: --set PART.NAME=VALUE):\n",
        );
        for part in &pack.composes {
            out.push_str(&format!("  {}: {}\n", part.pack, part.checks.join(", ")));
        }
    }
    out.push_str("\nchecks:\n");
    for c in &pack.checks {
        let modes = if c.modes.is_empty() {
            String::new()
        } else {
            format!(" [modes: {}]", c.modes.join(", "))
        };
        out.push_str(&format!(
            "  {:<32} {:<8} {:<6} {}{modes}\n",
            c.id,
            c.severity.as_str(),
            c.scope.as_str(),
            c.kind.name()
        ));
        if !c.doc.is_empty() {
            out.push_str(&format!("      {}\n", c.doc.trim()));
        }
    }
    out
}

fn lint(dirs: &[PathBuf], overrides: &[Override]) -> ExitCode {
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for dir in dirs {
        match packs::discover(dir) {
            Ok(found) => sources.extend(found),
            Err(more) => problems.extend(more),
        }
    }
    let names: Vec<PathBuf> = sources.iter().map(|s| s.dir.clone()).collect();
    let (loaded, more) = LoadedPacks::load(sources, overrides);
    problems.extend(more);
    for problem in &problems {
        out!("{problem}");
    }
    for dir in &names {
        if let Some(pack) = loaded.packs().iter().find(|p| &p.dir == dir) {
            for warning in contract::warnings(pack) {
                out!("{warning}");
            }
            err!("ok: {} {} ({})", pack.name, pack.version, dir.display());
        }
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        err!(
            "{} problem{}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        ExitCode::FAILURE
    }
}

fn test(dirs: &[PathBuf], verbose: bool, overrides: &[Override], from: ClusterFrom) -> ExitCode {
    let (mut passed, mut failed) = (0, 0);
    let mut unusable = false;
    let mut tested = Vec::new();
    for dir in dirs {
        let sources = match packs::discover(dir) {
            Ok(sources) => sources,
            Err(problems) => {
                report_problems(&problems);
                unusable = true;
                continue;
            }
        };
        for source in sources {
            let (loaded, mut problems) = LoadedPacks::load_alone(source.clone(), &[]);
            let name = loaded.packs().first().map(|pack| pack.name.clone());
            let own: Vec<Override> = overrides
                .iter()
                .filter(|o| Some(&o.pack) == name.as_ref())
                .cloned()
                .collect();
            if !own.is_empty() {
                problems.extend(LoadedPacks::load_alone(source.clone(), &own).1);
            }
            tested.extend(name);
            let pack = loaded.packs().first().filter(|_| problems.is_empty());
            let Some(pack) = pack else {
                for problem in &problems {
                    out!("{problem}");
                }
                out!(
                    "test {} ... FAILED (the pack does not load)",
                    source.dir.display()
                );
                failed += 1;
                continue;
            };
            match pack_tests::run_pack_tests(&source, &pack.name, &own, from) {
                Err(problems) => {
                    for problem in &problems {
                        out!("{problem}");
                    }
                    out!(
                        "test {} ... FAILED (its tests cannot run)",
                        source.dir.display()
                    );
                    failed += 1;
                }
                Ok(results) => {
                    for result in results {
                        if result.passed() {
                            out!("test {} ... ok", result.dir.display());
                            passed += 1;
                        } else {
                            out!("test {} ... FAILED", result.dir.display());
                            for failure in &result.failures {
                                out!("    {failure}");
                            }
                            failed += 1;
                        }
                        if verbose {
                            for line in &result.details {
                                out!("      {line}");
                            }
                        }
                    }
                }
            }
        }
    }
    for o in overrides.iter().filter(|o| !tested.contains(&o.pack)) {
        err!(
            "{}",
            o.problem(format!("no pack under test is called {}", o.pack))
        );
        unusable = true;
    }
    out!();
    out!("{passed} passed, {failed} failed");
    if unusable {
        ExitCode::from(EXIT_USAGE)
    } else if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn new(name: &str, kind: Kind, dir: Option<PathBuf>) -> ExitCode {
    let kind = match kind {
        Kind::Cni => PackKind::Cni,
        Kind::Rules => PackKind::Rules,
    };
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    match scaffold::new_pack(&dir, name, kind) {
        Ok(files) => {
            for file in files {
                out!("created {}", file.display());
            }
            out!();
            out!("run its tests with: skoop packs test {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            err!("error: {error}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
