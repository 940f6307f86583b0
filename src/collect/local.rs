//! `skoop collect local`: one network namespace of this machine, by its
//! `ip netns` name or the one skoop runs in. What is collected and how is
//! [`super::dump`]'s; this module finds the namespace and the tools.

use std::path::Path;

use super::command::find_tool;
use super::dump::{CollectError, CollectReport, collect_namespace};
use super::shell::{COMMAND_TIMEOUT, NodeShell};
use crate::packs::Datapath;

/// Where `ip netns add` puts named network namespaces and `ip netns exec`
/// looks for them.
const NETNS_RUN_DIR: &str = "/run/netns";

/// Writes the dump files of network namespace `netns` (by its `ip netns`
/// name; `None`: the namespace this process runs in) flat into `out`,
/// creating it if missing.
///
/// `Err` only when nothing can be collected (unknown namespace, `out` not
/// writable), or when `stop` resolved first (Ctrl-C: its words say why), the
/// tool running then killed with its process group; a tool that is missing
/// or fails skips its own file, as the report says.
pub fn collect_local(
    netns: Option<&str>,
    out: &Path,
    datapaths: &[Datapath],
    stop: impl Future<Output = &'static str>,
) -> Result<CollectReport, CollectError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| CollectError::CreateOutDir {
            dir: out.to_path_buf(),
            source,
        })?;
    let collect = async {
        let (enter, namespace) = match netns {
            Some(name) => (
                enter_netns(name).await?,
                format!("network namespace {name}"),
            ),
            None => (Vec::new(), "the current network namespace".to_string()),
        };
        collect_namespace(&NodeShell::Local, &enter, namespace, out, datapaths).await
    };
    runtime.block_on(async {
        tokio::select! {
            collected = collect => collected,
            why = stop => Err(CollectError::Stopped(why)),
        }
    })
}

/// The words that enter namespace `name`, once it is known to exist and
/// to be enterable.
async fn enter_netns(name: &str) -> Result<Vec<String>, CollectError> {
    // A name with a slash would make `ip netns exec` open it as a path.
    let known = !name.is_empty()
        && !name.contains('/')
        && name != "."
        && name != ".."
        && Path::new(NETNS_RUN_DIR).join(name).exists();
    if !known {
        return Err(CollectError::NoSuchNetns {
            name: name.to_string(),
        });
    }
    if find_tool("ip").is_none() {
        return Err(CollectError::IpMissing);
    }
    let enter: Vec<String> = ["ip", "netns", "exec", name]
        .iter()
        .map(|w| w.to_string())
        .collect();
    let probe = NodeShell::Local
        .run(&enter, &["true".to_string()], None, COMMAND_TIMEOUT)
        .await;
    match probe {
        Ok(output) if output.success() => Ok(enter),
        Ok(output) => Err(CollectError::CannotEnterNetns {
            name: name.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        }),
        Err(e) => Err(CollectError::CannotEnterNetns {
            name: name.to_string(),
            stderr: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::collect::dump::{IPVS_PROC_FILE, SkipReason};
    use crate::snapshot::netns::DumpFile;

    #[test]
    fn unknown_netns_is_an_error_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        for name in ["skoop-no-such-netns", "", "..", "../etc"] {
            let err = collect_local(Some(name), &out, &[], std::future::pending()).unwrap_err();
            assert!(
                matches!(err, CollectError::NoSuchNetns { .. }),
                "{name:?}: {err}"
            );
        }
        assert!(!out.exists());
    }

    #[test]
    fn output_directory_under_a_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, "").unwrap();
        let err = collect_local(None, &file.join("out"), &[], std::future::pending()).unwrap_err();
        assert!(matches!(err, CollectError::CreateOutDir { .. }), "{err}");
        assert!(err.to_string().contains("a-file/out"), "{err}");
    }

    #[test]
    fn current_namespace_accounts_for_every_dump_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new/dir");
        let report = collect_local(None, &out, &[], std::future::pending()).unwrap();
        let mut accounted: Vec<&str> = report
            .written
            .iter()
            .map(|w| w.file.as_str())
            .chain(report.skipped.iter().map(|s| s.file.as_str()))
            .collect();
        accounted.sort_unstable();
        let mut expected: Vec<&str> = DumpFile::ALL.iter().map(|f| f.name()).collect();
        expected.sort_unstable();
        assert_eq!(accounted, expected);
        for written in &report.written {
            assert!(out.join(&written.file).is_file(), "{}", written.file);
        }
        for skipped in &report.skipped {
            assert!(!out.join(&skipped.file).exists(), "{}", skipped.file);
        }
        assert!(crate::collect::dump::tests::leftover_temp_files(&out).is_empty());
        if report
            .written
            .iter()
            .any(|w| w.file == DumpFile::IpLink.name())
        {
            let links = fs::read_to_string(out.join(DumpFile::IpLink.name())).unwrap();
            assert!(links.contains("\"ifname\":\"lo\""), "{links}");
        }
    }

    #[test]
    fn ipvsadm_runs_only_where_ip_vs_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let report = collect_local(None, dir.path(), &[], std::future::pending()).unwrap();
        let ipvs_skipped = report
            .skipped
            .iter()
            .any(|s| s.file == DumpFile::Ipvsadm.name() && s.reason == SkipReason::IpvsNotInUse);
        assert_eq!(ipvs_skipped, !Path::new(IPVS_PROC_FILE).exists());
    }
}
