//! The loader's own tests: templates, overrides, engine requirements and
//! declarations read from a script that does not compile.

use super::expressions::{Piece, split_template};
use super::scripts::declares;
use super::*;

#[test]
fn template_splits_text_and_balanced_expressions() {
    let pieces = split_template("mtu ${ #{a: 1}.a + 1 } ok").expect("closed");
    let shown: Vec<String> = pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => format!("T{t:?}"),
            Piece::Expression { offset, text } => format!("E{offset}{text:?}"),
        })
        .collect();
    assert_eq!(shown, ["T\"mtu \"", "E6\" #{a: 1}.a + 1 \"", "T\" ok\""]);
    assert_eq!(split_template("a ${b").err(), Some(2));
}

#[test]
fn override_is_pack_dot_param_equals_value() {
    let o = Override::parse("flannel.mtu=1400").expect("valid");
    assert_eq!(
        (o.pack.as_str(), o.param.as_str(), o.value.as_str()),
        ("flannel", "mtu", "1400")
    );
    assert!(Override::parse("flannel=1400").is_err());
    assert!(Override::parse(".mtu=1").is_err());
}

#[test]
fn engine_requirement_is_all_of_its_comparators() {
    let req = VersionReq::parse(">=0.1.0, <0.3.0").expect("valid");
    assert!(req.matches(Version::parse("0.2.9").expect("v")));
    assert!(!req.matches(Version::parse("0.3.0").expect("v")));
    assert!(VersionReq::parse(">=one").is_err());
}

#[test]
fn a_declaration_is_read_from_a_script_that_does_not_compile() {
    let script =
        "fn vxlan_fdb(ctx) { let x = ; }\nfn  peer_route (ctx, arg) {}\nmy_fn other(ctx) {}";
    assert!(declares(script, "vxlan_fdb"));
    assert!(declares(script, "peer_route"));
    assert!(!declares(script, "vxlan"), "a prefix of a declared name");
    assert!(!declares(script, "other"), "not declared by `fn`");
    assert!(!declares(script, "x"));
}
