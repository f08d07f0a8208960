//! Switches on one deliberately broken line of the policy for the mutation script
//! (`runtime/tests/mutants.sh`): `LAGOM_MUTANT=NAME` sets `--cfg lagom_mutant="NAME"` for this
//! crate, as `runtime/build.rs` does for `lagom`, so that switching mutants rebuilds only the
//! lagom crates and the tests, not every dependency as a changed `RUSTFLAGS` would. Unset, it
//! does nothing.

fn main() {
    println!("cargo:rerun-if-env-changed=LAGOM_MUTANT");
    if let Ok(name) = std::env::var("LAGOM_MUTANT")
        && !name.is_empty()
    {
        println!("cargo:rustc-cfg=lagom_mutant=\"{name}\"");
    }
}
