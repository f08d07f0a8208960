#!/usr/bin/env bash
# The loom models' coverage report: runs every model with the runtime's probes
# recording (`runtime/src/locking/probe.rs`: each `probe!("file: step")` appends its name to
# $LAGOM_PROBE_FILE the first time a process passes it), then prints the steps of the wakeup,
# switch-out, exit, idle and kick protocols that no model reached. Every such step must be
# listed, with the reason, in loom-tests/unreached.txt; the script fails on a step that no
# model reaches and the list does not name, and on a listed step that a model now reaches
# (take it off the list). CI runs the loom suite through this script.
#
#   bash loom-tests/coverage.sh
#
# LOOM_MAX_PREEMPTIONS defaults to 2, as in CI; the build is CI's loom build (target/loom).
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/loom}
mkdir -p "$CARGO_TARGET_DIR"
hits=$CARGO_TARGET_DIR/probes.hit
case $hits in /*) ;; *) hits=$PWD/$hits ;; esac
: >"$hits"
LAGOM_PROBE_FILE=$hits RUSTFLAGS="--cfg loom" cargo test -p loom-tests --release

# Every probe of the source, comments left out; a call that rustfmt wrapped has its name on
# the next line, so the lines are joined first.
all=$(find runtime/src -name '*.rs' -exec cat {} + | grep -vE '^\s*//' | tr '\n' ' ' \
    | grep -oE 'probe!\(\s*"[^"]+"' | sed -E 's/^probe!\(\s*"//; s/"$//' | sort -u)
reached=$(sort -u "$hits")
listed=$( (grep -vE '^\s*(#|$)' loom-tests/unreached.txt || true) | sed -E 's/\s+#.*$//; s/\s+$//' | sort -u)
unreached=$(comm -23 <(echo "$all") <(echo "$reached"))
n_all=$(echo "$all" | grep -c . || true)
n_unreached=$(echo "$unreached" | grep -c . || true)
echo "loom coverage: $((n_all - n_unreached)) of $n_all protocol steps reached by some model"
if [ -n "$unreached" ]; then
    echo "not reached by any model (loom-tests/unreached.txt says why):"
    echo "$unreached" | sed 's/^/  /'
fi
status=0
new=$(comm -23 <(echo "$unreached") <(echo "$listed"))
if [ -n "$new" ]; then
    echo "FAIL: unreached and not in loom-tests/unreached.txt:"
    echo "$new" | sed 's/^/  /'
    status=1
fi
stale=$(comm -12 <(echo "$reached") <(echo "$listed"))
if [ -n "$stale" ]; then
    echo "FAIL: listed in loom-tests/unreached.txt but now reached (take them off):"
    echo "$stale" | sed 's/^/  /'
    status=1
fi
unknown=$(comm -13 <(echo "$all") <(echo "$listed"))
if [ -n "$unknown" ]; then
    echo "FAIL: listed in loom-tests/unreached.txt but no such probe:"
    echo "$unknown" | sed 's/^/  /'
    status=1
fi
exit $status
