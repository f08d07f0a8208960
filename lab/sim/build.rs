//! Switches on one deliberately broken line of the simulator for the mutation script
//! (`runtime/tests/mutants.sh`): `LAGOM_MUTANT=NAME` sets `--cfg lagom_mutant="NAME"` for this
//! crate, as `lab/policy/build.rs` and `runtime/build.rs` do for theirs, so that switching
//! mutants rebuilds only the lagom crates and the tests. Unset, it does nothing.

fn main() {
    println!("cargo:rerun-if-env-changed=LAGOM_MUTANT");
    if let Ok(name) = std::env::var("LAGOM_MUTANT")
        && !name.is_empty()
    {
        println!("cargo:rustc-cfg=lagom_mutant=\"{name}\"");
    }
}
