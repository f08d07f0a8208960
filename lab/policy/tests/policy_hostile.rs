//! Feature strings against hostile input: whatever the text, `Features::parse`
//! returns without a panic; a set it accepts prints as text that parses back to the same set,
//! and an error is one line naming the feature it did not know. Shapes that once broke it are
//! kept in `tests/corpus/features/`: each file's first line says what parsing must give
//! (`# expect: ok` or `# expect: error <text the message has>`), its second line is the spec
//! (`\n` in it stands for a line break).

use lagom_policy::Features;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

const CASES: u32 = 2048;

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// What every spec must satisfy; returns the error's text, if any.
fn check(spec: &str) -> Result<Features, String> {
    match Features::parse(spec) {
        Ok(f) => {
            let again = Features::parse(&f.to_string()).expect("a set's own text parses");
            assert_eq!(
                again, f,
                "{spec:?} prints as {f}, which parses to another set"
            );
            Ok(f)
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                !msg.is_empty() && !msg.contains(['\n', '\r']) && msg.len() < 2048,
                "not one readable line: {msg:?}\nspec: {spec:?}"
            );
            Err(msg)
        }
    }
}

/// Items of a spec: real names with and without `NO_`, `default`, near misses.
fn item() -> impl Strategy<Value = String> {
    let names: Vec<String> = Features::NAMES
        .iter()
        .flat_map(|n| {
            [
                n.to_string(),
                format!("NO_{n}"),
                n.to_lowercase(),
                format!("NO_NO_{n}"),
            ]
        })
        .chain(["default", "DEFAULT", "NO_", "NO", "", " ", "NO_default"].map(String::from))
        .collect();
    prop_oneof![
        6 => prop::sample::select(names),
        1 => "[A-Z_ ]{0,20}",
        1 => any::<String>(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_parses_or_fails_cleanly(spec in any::<String>()) {
        let _ = check(&spec);
    }

    #[test]
    fn lists_of_names_parse_or_fail_cleanly(
        items in prop::collection::vec(item(), 0..8),
        sep in prop::sample::select(vec![",", ", ", " , ", ",,", "\n", ";"]),
    ) {
        let spec = items.join(sep);
        let got = check(&spec);
        // Every item a real name (or `default`, or empty) and a comma between: accepted.
        let known = |i: &str| {
            let i = i.trim();
            i.is_empty() || i == "default" || Features::NAMES.contains(&i.strip_prefix("NO_").unwrap_or(i))
        };
        if sep.contains(',') && items.iter().all(|i| known(i)) {
            prop_assert!(got.is_ok(), "{spec:?} refused: {got:?}");
        }
    }
}

/// The corpus (module doc).
#[test]
fn corpus_specs_parse_or_fail_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/features");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the corpus is empty");
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a corpus file");
        let mut lines = text.lines();
        let expect = lines
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: the first line says `# expect: ...`", f.display()));
        let spec = lines.next().unwrap_or("").replace("\\n", "\n");
        let got = check(&spec).map(|_| ());
        match (expect.strip_prefix("error "), &got) {
            (None, Ok(())) if expect == "ok" => {}
            (Some(want), Err(msg)) if msg.contains(want) => {}
            _ => panic!("{}: expected {expect}, got {got:?}", f.display()),
        }
    }
}
