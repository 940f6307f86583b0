//! The pictures of a diagnosis (`-o dot`, `-o svg`, `-o html`,
//! `docs/pictures.md`): pinned byte for byte on every example against
//! `tests/golden/pictures/` (`SKOOP_BLESS=1` rewrites them, and the README's
//! picture under `docs/`), the DOT read by Graphviz, the HTML opened in
//! headless Chromium and clicked, `--output FILE`, and snapshot text that
//! carries markup shown as text.
//!
//! Graphviz (`dot`) and Chromium are needed only here. Without them these
//! tests say so loudly and pass, unless `SKOOP_REQUIRE_BROWSER` is set (as
//! `.ci/run` sets it), when they fail.

mod common;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::browser::{Browser, tool};
use serde_json::{Value, json};

/// (name, arguments after `--snapshot DIR`): a service's fan-out, and a pod
/// to pod flow (denied by a NetworkPolicy in the Calico examples).
const FLOWS: &[(&str, &[&str])] = &[
    (
        "web-0_svc_web",
        &["--from", "default/web-0", "--to", "svc/default/web"],
    ),
    (
        "web-0_web-3_udp",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--protocol",
            "udp",
        ],
    ),
];

const FORMATS: &[&str] = &["dot", "svg", "html"];

/// The README's picture, and the flow it shows.
const README_PICTURE: &str = "docs/pictures/flannel-vxlan-broken.svg";
const README_FLOW: &[&str] = &[
    "--snapshot",
    "examples/flannel-vxlan-broken",
    "--from",
    "default/web-0",
    "--to",
    "svc/default/web",
    "-o",
    "svg",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bless() -> bool {
    std::env::var_os("SKOOP_BLESS").is_some()
}

/// Every bundled example, by its path from the package root.
fn examples() -> Vec<String> {
    let mut examples: Vec<String> = fs::read_dir(root().join("examples"))
        .expect("examples/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.is_dir())
        .map(|path| format!("examples/{}", path.file_name().unwrap().to_string_lossy()))
        .collect();
    examples.sort();
    examples
}

fn skoop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(root())
        .arg("diagnose")
        .args(args)
        .output()
        .expect("run skoop")
}

/// `skoop diagnose` that must end with a report (exit 0 or 1, nothing on
/// stderr); its stdout.
fn report(args: &[&str]) -> String {
    let output = skoop(args);
    assert!(
        matches!(output.status.code(), Some(0 | 1)) && output.stderr.is_empty(),
        "{args:?}: {:?} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// Where this test keeps what it leaves to look at (screenshots).
fn artefacts() -> PathBuf {
    let dir = root().join("target/test-artefacts/pictures");
    fs::create_dir_all(&dir).expect("create the artefacts directory");
    dir
}

#[test]
fn pictures_match_the_goldens_on_every_example() {
    let golden = root().join("tests/golden/pictures");
    let mut goldens = common::golden::Goldens::new();
    for example in examples() {
        let name = Path::new(&example).file_name().unwrap().to_string_lossy();
        let dir = golden.join(&*name);
        for (flow, args) in FLOWS {
            for format in FORMATS {
                let mut all = vec!["--snapshot", &example, "-o", format];
                all.extend_from_slice(args);
                let actual = report(&all);
                goldens.check(&dir.join(format!("{flow}.{format}")), &actual);
            }
        }
    }
    goldens.assert_none_differ();
}

#[test]
fn the_readme_picture_is_what_the_tool_draws_today() {
    let actual = report(README_FLOW);
    let file = root().join(README_PICTURE);
    if bless() {
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, &actual).unwrap();
        return;
    }
    let committed = fs::read_to_string(&file).unwrap_or_default();
    assert!(
        committed == actual,
        "{README_PICTURE} is stale: SKOOP_BLESS=1 cargo test --test pictures redraws it"
    );
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.contains(README_PICTURE),
        "the README shows the picture"
    );
}

#[test]
fn graphviz_reads_the_dot_of_every_example() {
    let Some(dot) = tool("dot", "graphviz") else {
        return;
    };
    for example in examples() {
        for (_, args) in FLOWS {
            let mut all = vec!["--snapshot", &example, "-o", "dot"];
            all.extend_from_slice(args);
            let source = report(&all);
            let mut child = Command::new(&dot)
                .arg("-Tsvg")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run dot");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(source.as_bytes())
                .unwrap();
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success() && output.stderr.is_empty(),
                "dot refuses {example} {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

#[test]
fn output_file_takes_its_format_from_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let flow = [
        "--snapshot",
        "examples/flannel-vxlan",
        "--from",
        "default/web-0",
    ];
    let cases = [
        ("report.json", "{\n  \"schema_version\": 2,"),
        ("report.dot", "digraph skoop {"),
        ("report.gv", "digraph skoop {"),
        ("report.svg", "<svg xmlns="),
        ("report.HTML", "<!DOCTYPE html>"),
        ("report.htm", "<!DOCTYPE html>"),
        ("report.txt", "default/web-0 -> default/web-3:8080"),
    ];
    for (name, start) in cases {
        let path = dir.path().join(name);
        let path = path.to_str().unwrap();
        let mut args = flow.to_vec();
        args.extend(["--to", "default/web-3:8080", "--output", path]);
        let stdout = report(&args);
        assert_eq!(stdout, "", "{name}: the report goes to the file only");
        let written = fs::read_to_string(path).unwrap();
        assert!(written.starts_with(start), "{name}: {written:.80}");
    }
    // -o wins over the extension.
    let path = dir.path().join("picture.txt");
    let mut args = flow.to_vec();
    args.extend(["--to", "default/web-3:8080", "-o", "svg", "--output"]);
    args.push(path.to_str().unwrap());
    report(&args);
    assert!(fs::read_to_string(&path).unwrap().starts_with("<svg"));
}

/// A diagnosis from a pod the example lacks, written to `--output path`.
fn unknown_pod_into(path: &Path) -> Output {
    skoop(&[
        "--snapshot",
        "examples/flannel-vxlan",
        "--from",
        "default/nope",
        "--to",
        "default/web-3:8080",
        "--output",
        path.to_str().unwrap(),
    ])
}

#[test]
fn a_usage_error_under_json_goes_to_the_output_file_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let output = unknown_pod_into(&path);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let report: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(report["schema_version"], json!(2));
    assert!(report["error"].as_str().unwrap().contains("default/nope"));
}

#[test]
fn a_run_without_a_report_leaves_the_output_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.svg");
    let output = unknown_pod_into(&path);
    assert_eq!(output.status.code(), Some(2));
    assert!(!path.exists(), "no empty report.svg is left behind");
    // Nor does it spoil the report an earlier run wrote there.
    fs::write(&path, "<svg>earlier</svg>").unwrap();
    assert_eq!(unknown_pod_into(&path).status.code(), Some(2));
    assert_eq!(fs::read_to_string(&path).unwrap(), "<svg>earlier</svg>");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file stays"
    );
}

#[test]
fn output_json_as_a_bare_word_still_selects_the_format() {
    let stdout = report(&[
        "--snapshot",
        "examples/flannel-vxlan",
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "--output",
        "json",
    ]);
    assert!(
        stdout.starts_with("{\n  \"schema_version\": 2,"),
        "{stdout:.80}"
    );
    assert!(!root().join("json").exists());
}

#[test]
fn an_output_file_that_cannot_be_written_is_a_clear_error() {
    let output = skoop(&[
        "--snapshot",
        "examples/flannel-vxlan",
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "--output",
        "/nonexistent-dir/report.html",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: --output: cannot write /nonexistent-dir/report.html: "),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

/// The payloads put into a copy of calico-bgp: in a pod's name, and in the
/// comment of the rule that drops its flow.
const POD_PAYLOAD: &str = "web-0<img src=x onerror=alert(2)>";
const COMMENT_PAYLOAD: &str = "<script>alert(1)</script>";

/// calico-bgp with web-0 renamed to [`POD_PAYLOAD`] and the NetworkPolicy's
/// dropping rule commented with [`COMMENT_PAYLOAD`].
fn hostile_snapshot() -> tempfile::TempDir {
    let dir = common::copy_snapshot("examples/calico-bgp");
    common::edit_text(&dir.path().join("cluster/pods.yaml"), |text| {
        text.replacen(
            "    name: web-0\n",
            &format!("    name: \"{POD_PAYLOAD}\"\n"),
            1,
        )
    });
    // Its dump stays under its old name: a directory named so is refused
    // (snapshot::name), so the pod's namespace is not in the snapshot, and
    // the report shows its name all the same.
    let rules = dir.path().join("nodes/node-2/host/iptables-save.txt");
    common::edit_text(&rules, |text| {
        text.replace(
            "--comment \"Drop if no policies passed packet\"",
            &format!("--comment \"{COMMENT_PAYLOAD}\""),
        )
    });
    dir
}

fn hostile_args(dir: &Path, format: &str) -> Vec<String> {
    [
        "--snapshot",
        dir.to_str().unwrap(),
        "--from",
        &format!("default/{POD_PAYLOAD}"),
        "--to",
        "default/web-3:8080",
        "--protocol",
        "udp",
        "-o",
        format,
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn markup_in_a_snapshot_is_shown_as_text() {
    let dir = hostile_snapshot();
    for format in ["svg", "html"] {
        let args = hostile_args(dir.path(), format);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = report(&args);
        assert!(!out.contains("<img"), "{format}: a pod name became markup");
        assert!(
            !out.contains(COMMENT_PAYLOAD),
            "{format}: a rule comment became markup"
        );
        assert!(
            out.contains("web-0&lt;img src=x onerror=alert(2)&gt;"),
            "{format}: the pod's name is shown"
        );
        if format == "html" {
            assert!(
                out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "the rule's comment is shown"
            );
            assert_eq!(out.matches("<script>").count(), 1, "only the page's script");
        }
    }
    // DOT quotes it: a quote in a name cannot end the string.
    let args = hostile_args(dir.path(), "dot");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(report(&args).contains(&format!("label=\"default/{POD_PAYLOAD}\\l")));
}

/// Opens the HTML report of `args` from disk in Chromium, checks the page,
/// clicks a hop and keeps a screenshot as `name.png`.
fn open_and_click(chromium: &Path, name: &str, args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join(format!("{name}.html"));
    let mut all = args.to_vec();
    all.extend(["--output", page.to_str().unwrap()]);
    report(&all);
    let json: Value = {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&report(&all)).unwrap()
    };
    let mut browser = Browser::start(chromium);
    browser.open(&format!("file://{}", page.display()));
    let verdict = browser.eval("document.getElementById('verdict').textContent");
    let disposition = json["disposition"].as_str().unwrap();
    assert!(
        verdict.as_str().unwrap().contains(disposition),
        "{name}: the verdict is shown first: {verdict}"
    );
    // Every hop is in the picture and has its steps in the page.
    let hops = json["hops"].as_array().unwrap();
    let shown = browser.eval(
        "[...document.querySelectorAll('svg g.hop')].map(g => g.querySelector('text').textContent)",
    );
    let ids: Vec<&str> = hops.iter().map(|h| h["id"].as_str().unwrap()).collect();
    let shown: Vec<&str> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(shown, ids, "{name}: every hop, in the report's order");
    let details = browser.eval("document.querySelectorAll('.hop-detail').length");
    assert_eq!(details, json!(hops.len()));
    // A real click on the first hop in the picture shows its steps.
    let last = hops.len() - 1;
    let visible =
        "[...document.querySelectorAll('.hop-detail')].filter(d => !d.hidden).map(d => d.id)";
    assert_ne!(browser.eval(visible), json!(["hop-0"]));
    browser.click("svg g.hop[data-hop='0'] rect");
    assert_eq!(
        browser.eval(visible),
        json!(["hop-0"]),
        "{name}: the click shows hop 0"
    );
    let steps = browser.eval("document.querySelectorAll('#hop-0 table.steps tr').length");
    assert_eq!(steps, json!(hops[0]["steps"].as_array().unwrap().len()));
    // And so does a click on a hop in a path's list.
    browser.click(&format!("ol.chain button[data-hop='{last}']"));
    assert_eq!(browser.eval(visible), json!([format!("hop-{last}")]));
    let problems = browser.problems();
    assert!(problems.is_empty(), "{name}: {problems:#?}");
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "{name}: a PNG screenshot");
    fs::write(artefacts().join(format!("{name}.png")), png).unwrap();
}

#[test]
fn the_html_report_opens_from_disk_in_chromium_and_shows_a_clicked_hops_steps() {
    let Some(chromium) = tool("chromium", "chromium") else {
        return;
    };
    open_and_click(
        &chromium,
        "flannel-vxlan-broken-service",
        &[
            "--snapshot",
            "examples/flannel-vxlan-broken",
            "--from",
            "default/web-0",
            "--to",
            "svc/default/web",
        ],
    );
    open_and_click(
        &chromium,
        "calico-bgp-networkpolicy",
        &[
            "--snapshot",
            "examples/calico-bgp",
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--protocol",
            "udp",
        ],
    );
}

#[test]
fn markup_in_a_snapshot_runs_no_script_in_chromium() {
    let Some(chromium) = tool("chromium", "chromium") else {
        return;
    };
    let dir = hostile_snapshot();
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("hostile.html");
    let mut args = hostile_args(dir.path(), "html");
    args.extend(["--output".to_string(), page.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    report(&args);
    let mut browser = Browser::start(&chromium);
    browser.open(&format!("file://{}", page.display()));
    assert_eq!(browser.eval("document.images.length"), json!(0));
    assert_eq!(browser.eval("document.scripts.length"), json!(1));
    let text = browser.eval("document.body.textContent");
    let text = text.as_str().unwrap();
    assert!(text.contains(POD_PAYLOAD) && text.contains(COMMENT_PAYLOAD));
    browser.click("svg g.hop[data-hop='0'] rect");
    let problems = browser.problems();
    assert!(
        problems.is_empty(),
        "a script ran or the page failed: {problems:#?}"
    );
    fs::write(artefacts().join("hostile.png"), browser.screenshot()).unwrap();
}
