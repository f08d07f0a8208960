#!/usr/bin/env bash
# Valgrind's memcheck over the runtime's test binaries that exercise a task's exit and the
# freeing of its task and stack, the recycle of a joined task's allocation, the shutdown (the
# sweep, the cancellation, abandoned tasks) and the blocking pool, and the scopes, task graphs,
# task-locals and fibers built on them.
# The sync tests are left out: their watchdogs (no progress for 10 s) trip under memcheck on a
# loaded machine; run by hand (`bash .ci/memcheck.sh sync_mutex sync_misc`) they show no error.
# The runtime is built with its `valgrind` feature, which tells valgrind where each task's
# stack is (runtime/src/arch/valgrind.rs): without it memcheck takes every switch between two
# stacks of a batch for a huge frame and reports hundreds of errors that are not there. Any
# error fails the script (`--error-exitcode`), so the subset runs with zero errors.
#
#   bash .ci/memcheck.sh               # the CI subset (TESTS below)
#   bash .ci/memcheck.sh NAME...       # these test binaries of runtime/tests/ instead
#   LAGOM_MUTANT=NAME bash .ci/memcheck.sh runtime_exit
#                                      # the same with a mutant on (runtime/build.rs); with
#                                      # MEMCHECK_PROFILE=release the debug checks are off,
#                                      # so memcheck alone has to see the bug
#
# The tests that assert a wall-clock bound are skipped (SKIP below): under valgrind the
# program runs some 20-50 times slower, one thread at a time. The suppressions file
# (.ci/memcheck.supp) names each false report of optimised code that memcheck cannot see
# through, with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."

TESTS=(runtime_exit runtime_recycle runtime_registry panic_join runtime_join_packet runtime_shutdown
    runtime_blocking scope_join graph task_local fiber_exit_hook fiber_header)
# test binary:test name, each skipped because it asserts a wall-clock bound.
SKIP=(
    runtime_shutdown:dropping_a_runtime_with_a_spinning_task_does_not_hang
    runtime_shutdown:loops_that_never_block_are_cancelled_within_the_timeout
    runtime_shutdown:a_task_that_catches_the_cancellation_is_abandoned_and_reported
    runtime_shutdown:a_task_that_never_calls_into_lagom_is_reported_not_waited_for
    runtime_blocking:ten_blocking_sleeps_overlap_on_two_workers
    runtime_blocking:a_burst_beyond_the_idle_threads_grows_the_pool
)
[ $# -gt 0 ] && TESTS=("$@")

if ! command -v valgrind >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq valgrind
fi

profile=${MEMCHECK_PROFILE:-test}
case $profile in
test) prof=() ;;
release) prof=(--release) ;;
*) echo "MEMCHECK_PROFILE: test or release, not '$profile'" >&2; exit 2 ;;
esac
which=()
for t in "${TESTS[@]}"; do which+=(--test "$t"); done
mapfile -t bins < <(cargo test -q -p lagom --features valgrind "${prof[@]}" "${which[@]}" --no-run \
    --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["target"]["name"] + " " + m["executable"])
')

supp=$PWD/.ci/memcheck.supp
failed=0
t_all=$SECONDS
for row in "${bins[@]}"; do
    read -r name bin <<<"$row"
    skip=()
    for s in "${SKIP[@]}"; do
        [ "${s%%:*}" = "$name" ] && skip+=(--skip "${s#*:}")
    done
    t0=$SECONDS
    log=target/memcheck-$name.log
    rc=0
    valgrind --tool=memcheck --error-exitcode=99 --suppressions="$supp" \
        --expensive-definedness-checks=yes "$bin" "${skip[@]}" >"$log" 2>&1 || rc=$?
    errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | grep -oE '[0-9]+' || echo "?")
    result=$(grep -E '^test result:' "$log" | tail -n1 || true)
    echo "memcheck $name: $errors errors, exit $rc, $((SECONDS - t0)) s; $result"
    if [ "$rc" -ne 0 ]; then
        grep -E '^==[0-9]+== +(Invalid|Conditional|Use of|Syscall|Mismatched|Source and)' "$log" \
            | sort | uniq -c | sort -rn | head -n 5 || true
        echo "  log: $log"
        failed=$((failed + 1))
    fi
done
echo "memcheck: ${#bins[@]} test binaries, $failed with errors or failures, in $((SECONDS - t_all)) s"
[ "$failed" -eq 0 ]
