//! Switches on one deliberately broken line of the runtime for the mutation scripts
//! (`loom-tests/mutants.sh`, `runtime/tests/mutants.sh`): `LAGOM_MUTANT=NAME` sets
//! `--cfg lagom_mutant="NAME"` for this crate alone, so that switching mutants rebuilds only
//! lagom and the tests, not every dependency as a changed `RUSTFLAGS` would. Unset, it does
//! nothing.

fn main() {
    println!("cargo:rerun-if-env-changed=LAGOM_MUTANT");
    if let Ok(name) = std::env::var("LAGOM_MUTANT")
        && !name.is_empty()
    {
        println!("cargo:rustc-cfg=lagom_mutant=\"{name}\"");
    }
}
