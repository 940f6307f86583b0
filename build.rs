//! Embeds the built-in packs (`rules/*/` and `plugins/*/`: pack.yaml, *.rhai,
//! lib/*.rhai) in the binary, so that skoop works from any directory, and
//! names the build's snapshot code for the cluster cache.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut out = String::from(
        "/// Built-in packs: (directory, [(file, text)]).\npub const BUILTIN_PACKS: &[(&str, &[(&str, &str)])] = &[\n",
    );
    for group in ["rules", "plugins"] {
        println!("cargo:rerun-if-changed={group}");
        for pack in sorted_entries(&root.join(group)) {
            if !pack.join("pack.yaml").is_file() {
                continue;
            }
            println!("cargo:rerun-if-changed={}", pack.display());
            // A path that does not exist is always out of date, and would
            // rebuild skoop every time; a new lib/ changes the pack's
            // directory, watched above.
            if pack.join("lib").is_dir() {
                println!("cargo:rerun-if-changed={}", pack.join("lib").display());
            }
            let name = pack
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let _ = writeln!(out, "    (\"{group}/{name}\", &[");
            let mut files = vec![("pack.yaml".to_owned(), pack.join("pack.yaml"))];
            for (prefix, dir) in [("", pack.clone()), ("lib/", pack.join("lib"))] {
                for file in sorted_entries(&dir) {
                    let Some(file_name) = file.file_name().and_then(|n| n.to_str()) else {
                        continue;
                    };
                    if file.is_file() && file_name.ends_with(".rhai") {
                        files.push((format!("{prefix}{file_name}"), file.clone()));
                    }
                }
            }
            for (relative, path) in files {
                println!("cargo:rerun-if-changed={}", path.display());
                let _ = writeln!(
                    out,
                    "        ({relative:?}, include_str!({:?})),",
                    path.display().to_string()
                );
            }
            out.push_str("    ]),\n");
        }
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out_dir.join("builtin_packs.rs"), out) {
        panic!("cannot write builtin_packs.rs: {e}");
    }
    snapshot_code(&root);
}

/// A cluster cache holds the model this build's snapshot code reads
/// `cluster/` into: `SKOOP_SNAPSHOT_CODE`, a hash of that code, of the
/// manifest and locked dependencies (their versions and features) and of
/// the compiler's version, tells a cache written by a build that reads it
/// the same way from one that may not.
fn snapshot_code(root: &Path) {
    let mut files = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    let mut dirs = vec![root.join("src/snapshot")];
    while let Some(dir) = dirs.pop() {
        for entry in sorted_entries(&dir) {
            if entry.is_dir() {
                dirs.push(entry);
            } else {
                files.push(entry);
            }
        }
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in &files {
        let name = file.strip_prefix(root).unwrap_or(file);
        let text = std::fs::read(file).unwrap_or_default();
        for part in [name.as_os_str().as_encoded_bytes(), &text] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .map(|output| output.stdout)
        .unwrap_or_default();
    hasher.update(&version);
    let hash = hasher.finalize();
    let mut hex = String::new();
    for byte in &hash[..8] {
        let _ = write!(hex, "{byte:02x}");
    }
    println!("cargo:rerun-if-changed=src/snapshot");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!(
        "cargo:rustc-env=SKOOP_SNAPSHOT_CODE={}-{hex}",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    entries
}
