//! What a golden file's failure shows: a line diff of expected against
//! actual, with context, and `SKOOP_BLESS`'s rewriting.

mod common;

use common::golden::{Goldens, diff};

/// Lines `first..=last`, each `line N`.
fn numbered(first: usize, last: usize) -> String {
    (first..=last).map(|n| format!("line {n}\n")).collect()
}

#[test]
fn a_changed_line_is_shown_with_three_lines_of_context() {
    let expected = numbered(1, 20);
    let actual = expected.replace("line 10\n", "line ten\n");
    assert_eq!(
        diff(&expected, &actual),
        "\
@@ -7,7 +7,7 @@
 line 7
 line 8
 line 9
-line 10
+line ten
 line 11
 line 12
 line 13
"
    );
}

#[test]
fn changes_far_apart_are_separate_hunks_and_near_ones_one() {
    let expected = numbered(1, 30);
    let actual = expected
        .replace("line 2\n", "")
        .replace("line 5\n", "line 5\nline 5b\n")
        .replace("line 25\n", "line 25!\n");
    assert_eq!(
        diff(&expected, &actual),
        "\
@@ -1,8 +1,8 @@
 line 1
-line 2
 line 3
 line 4
 line 5
+line 5b
 line 6
 line 7
 line 8
@@ -22,7 +22,7 @@
 line 22
 line 23
 line 24
-line 25
+line 25!
 line 26
 line 27
 line 28
"
    );
}

#[test]
fn a_missing_last_newline_and_a_missing_golden_file_are_shown() {
    assert_eq!(
        diff("a\nb\n", "a\nb"),
        "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n"
    );
    assert_eq!(diff("", "new\n"), "@@ -0,0 +1,1 @@\n+new\n");
}

#[test]
fn a_long_diff_is_cut_and_the_rest_counted() {
    let expected = numbered(1, 2000);
    let actual: String = (1..=2000)
        .map(|n| format!("line {}\n", if n % 10 == 0 { n * 7 } else { n }))
        .collect();
    let shown = diff(&expected, &actual);
    assert!(shown.len() < 20_000, "{} bytes", shown.len());
    assert!(
        shown.ends_with("... and 200 more changed lines\n"),
        "{shown}"
    );
}

#[test]
fn a_failure_names_each_file_that_differs_with_its_diff_and_bless_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.txt");
    std::fs::write(&file, numbered(1, 5)).unwrap();

    let mut goldens = Goldens::blessing(false);
    goldens.check(&file, &numbered(1, 5));
    assert_eq!(goldens.report(), "", "the same output is no difference");
    goldens.check(&file, &numbered(2, 5));
    let name = file.display();
    assert_eq!(
        goldens.report(),
        format!(
            "--- {name} (expected)\n+++ {name} (actual)\n@@ -1,4 +1,3 @@\n-line 1\n line 2\n line 3\n line 4\n"
        )
    );
    let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        goldens.assert_none_differ()
    }))
    .unwrap_err();
    let message = failure.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("SKOOP_BLESS=1 rewrites them") && message.contains("-line 1\n"),
        "{message}"
    );

    let mut blessing = Goldens::blessing(true);
    blessing.check(&file, &numbered(2, 5));
    blessing.assert_none_differ();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), numbered(2, 5));
    let mut again = Goldens::blessing(false);
    again.check(&file, &numbered(2, 5));
    assert_eq!(again.report(), "", "the blessed file is what was written");
}
