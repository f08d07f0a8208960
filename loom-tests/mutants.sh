#!/usr/bin/env bash
# Builds every loom model once more with the one-line mutation its doc comment names, and
# reports whether loom caught it. A model that no mutation breaks checks nothing, so a mutant
# that survives fails this script.
#
#   bash loom-tests/mutants.sh            # every mutant
#   bash loom-tests/mutants.sh NAME...    # only these (a name not in the list: exit 2)
#
# LOOM_MAX_PREEMPTIONS defaults to 2, as in CI; the models of a waker's claim raise it to 3
# themselves (`loom_tests::claim_model`), so their rows run at 3. The mutant is switched on by LAGOM_MUTANT
# (runtime/build.rs turns it into `--cfg lagom_mutant="NAME"` for lagom alone), so loom and
# the other dependencies are built once for all mutants; each mutant rebuilds lagom and one
# model. The builds are incremental (CARGO_INCREMENTAL=1, although the profile is release):
# a mutant's cfg changes one or two functions, so rustc reuses the rest of lagom's and the
# model's compiled code instead of a full release build of lagom and the model per row
# (docs/src/lab/tooling.md has the times).
set -euo pipefail
cd "$(dirname "$0")/.."

# mutant name              model (test target in loom-tests/tests/)
MUTANTS=(
    "llist_push_relaxed     wakelist"
    "kick_no_recheck        idle_kick"
    "kick_no_fence          idle_kick"
    "lock_relaxed_unlock    rq_lock"
    "park_no_waker_fence    ttwu"
    "ttwu_no_sleeper_fence  ttwu"
    "ttwu_no_claim          ttwu"
    "finish_relaxed_on_cpu  ttwu"
    "unpark_look_first      ttwu"
    "join_split_check       join"
    "park_no_waker_fence    join"
    "ttwu_no_sleeper_fence  join"
    "ttwu_runnable_no_recheck      delayed"
    "drain_delayed_no_recheck      delayed"
    "finish_delayed_relaxed_on_rq  delayed"
    "drain_no_chase                migrate"
    "ttwu_runnable_no_cpu_recheck  migrate"
    "ttwu_on_cpu_wrong_cpu         on_cpu"
    "ttwu_no_on_cpu_wait           on_cpu"
    "finish_relaxed_on_cpu         on_cpu"
    "ttwu_held_wrong_rq            exit_wake"
    "ttwu_held_any_target          exit_wake"
    "select_ignores_contract       contract"
    "balance_ignores_contract      contract"
    "ttwu_queue_no_kick            idle_worker"
    "idle_recheck_no_wakelist      idle_worker"
    "remote_enqueue_no_kick        idle_worker"
    "idle_recheck_no_nr_running    idle_worker"
    "ttwu_no_on_cpu_wait           two_wakers"
    "finish_relaxed_on_cpu         two_wakers"
    "drain_delayed_no_recheck      migrate"
    "waiters_validate_unlocked     waiters"
    "waiters_count_late            waiters"
    "once_no_queued_bit            once"
    "recycle_no_unique_check       exit_recycle"
    "timer_fire_no_token           timer_unpark"
    "blocking_no_unpark            blocking"
    "sweep_no_unpark               shutdown_sweep"
    "ttwu_no_claim                 shutdown_sweep"
    "ttwu_runnable_no_cpu_recheck  balance_wake"
    "ttwu_runnable_no_recheck      balance_wake"
    "ttwu_claim_relaxed            two_wakers"
    "drain_on_rq_relaxed           migrate"
    "drain_takeback_stale_cpu      migrate"
    "put_dead_before_clear_on_cpu  exit_recycle"
    "tick_cleared_by_store         resched_word"
    "wake_pending_cleared_late     resched_word"
    "monitor_wake_no_fence         monitor_deep_sleep"
    "monitor_deep_no_recheck       monitor_deep_sleep"
)

export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/loom-mutants}
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-1}
source .ci/mutant_names.sh
check_mutant_names "$@"
caught=0
missed=0
t_all=$SECONDS
for row in "${MUTANTS[@]}"; do
    read -r name model <<<"$row"
    mutant_wanted "$name" || continue
    t0=$SECONDS
    log=$CARGO_TARGET_DIR/$name.log
    mkdir -p "$CARGO_TARGET_DIR"
    if RUSTFLAGS="--cfg loom" LAGOM_MUTANT=$name \
        cargo test -q -p loom-tests --release --test "$model" >"$log" 2>&1; then
        echo "MISSED  $name (model $model passed with the mutation; log: $log)"
        missed=$((missed + 1))
    elif grep -q "panicked" "$log"; then
        reason=$(grep -m1 -A1 "panicked" "$log" | tail -n1)
        echo "caught  $name by $model in $((SECONDS - t0)) s: $reason"
        caught=$((caught + 1))
    else
        echo "ERROR   $name: the build or run failed without a model failure; log: $log"
        missed=$((missed + 1))
    fi
done
echo "$caught caught, $missed missed in $((SECONDS - t_all)) s"
[ "$missed" -eq 0 ]
