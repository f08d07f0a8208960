#!/usr/bin/env bash
# The ordinary tests' mutants: builds the test that must catch each mutant, with the one
# deliberately broken line that `--cfg lagom_mutant="NAME"` switches on in the policy
# (lab/policy), the simulator (lab/sim) or the driver (runtime), and runs it. A test that
# passes with its mutant checks nothing, so a survivor fails this script. The loom models'
# mutants are in loom-tests/mutants.sh.
#
#   bash runtime/tests/mutants.sh            # every mutant
#   bash runtime/tests/mutants.sh NAME...    # only these (a name not in the list: exit 2)
#
# The mutant is switched on by LAGOM_MUTANT (runtime/build.rs, lab/policy/build.rs and
# lab/sim/build.rs turn it into the cfg for lagom, lagom-policy and lagom-sim, the crates
# with mutants; a changed RUSTFLAGS would rebuild every dependency), so all mutants share
# one target directory
# ($MUTANTS_TARGET_DIR, default target/mutants) and its dependencies: each mutant rebuilds
# only the lagom crates and the one test binary that must catch it. Each run is bounded by
# a timeout of $MUTANT_TIMEOUT s (default 120): the tests fail by themselves (an assertion,
# or a watchdog that exits the process), so a run that reaches the timeout is reported as
# HUNG and counts as missed.
set -euo pipefail
cd "$(dirname "$0")/../.."

# mutant name               package[:features]  test target (its tests/, or lib: the crate's unit tests)  test name (exact)
MUTANTS=(
    "charge_weight_blind       lagom-policy  policy_property  random_sequences_keep_every_invariant"
    "pick_eligibility_blind    lagom-policy  policy_property  random_sequences_keep_every_invariant"
    "delay_every_sleeper       lagom-policy  policy_property  random_sequences_keep_every_invariant"
    "delay_every_sleeper       lagom-policy  policy_delay     an_eligible_sleeper_leaves_at_once"
    "delayed_no_lag_floor      lagom-policy  policy_property  random_sequences_keep_every_invariant"
    "unpark_drop_one_in_1000   lagom         runtime_wake     storm_three_seconds"
    "periodic_balance_off      lagom         runtime_balance  the_periodic_balance_evens_out_busy_workers"
    "lb_all_pinned_no_redo     lagom-policy  policy_balance   an_idle_cpu_passes_over_an_all_pinned_busiest_cpu"
    "lb_all_pinned_no_redo     lagom-policy  policy_balance   the_periodic_balance_passes_over_an_all_pinned_sibling"
    "lb_all_pinned_no_redo     lagom-sim     sim_placement    an_idle_cpu_passes_over_a_cpu_whose_tasks_are_all_pinned"
    "host_stall_charged        lagom         runtime_clock    the_task_clock_leaves_host_stalls_out_of_the_charge"
    "active_balance_no_recheck lagom-sim     sim_placement    active_balance_recheck_leaves_a_busy_preferred_cpu_alone"
    "active_balance_no_recheck lagom         runtime_place    itmt_active_balance_moves_to_a_worker_busy_since_it_asked"
    "spawn_no_preempt_point    lagom         runtime_spawn    a_spawning_loop_lets_its_children_run_once_its_request_is_used_up"
    "lock_short_spin           lagom         lib              locking::lock::tests::a_waiter_spins_through_a_short_hold"
    "rwlock_downgrade_unlock   lagom         sync_rwlock      test_downgrade_atomic::tasks_1_worker"
    "asym_prefer_tie_by_index  lagom-policy  policy_cpumap    itmt_ignores_equal_priorities"
    "asym_prefer_tie_by_index  lagom-sim     sim_placement    itmt_leaves_cpus_of_equal_priority_alone"
    "active_request_last_wins  lagom-sim     sim_placement    the_first_active_balance_request_stands"
    "try_no_preempt_point      lagom         sync_spin        a_sender_spinning_until_the_receiver_left_lets_it_leave"
    "try_no_preempt_point      lagom         sync_spin        every_failing_attempt_is_a_preemption_point"
    "condvar_cancel_unlocks    lagom         sync_condvar     a_cancelled_waiter_never_unlocks_a_mutex_it_does_not_hold"
    "condvar_cancel_unlocks    lagom         lib              tests::a_cancelled_barrier_waiter_never_unlocks_the_barriers_lock"
    "unwinding_task_switches   lagom         runtime_unwind   no_task_sees_another_tasks_unwinding"
    "unwinding_task_raised     lagom         runtime_unwind   a_shutdown_never_raises_inside_a_destructor_that_runs_during_a_panic"
    "scope_wait_cancellable    lagom         scope_join       a_scope_owner_asked_to_unwind_while_waiting_on_one_worker_waits_for_its_child"
    "scope_wait_cancellable    lagom         scope_join       a_join_asked_to_unwind_while_waiting_on_one_worker_waits_for_b"
    "blocking_uncounted_early  lagom         task_blocking    a_shutdown_that_gives_up_while_the_closure_runs_leaks_the_stack_it_borrows"
    "blocking_wait_cancellable lagom         task_blocking    a_shutdown_lets_the_closure_end_and_then_cancels_the_task"
    "put_dead_before_clear_on_cpu lagom      runtime_exit     an_exit_wakes_its_joiner_on_every_path"
    "quota_ignored             lagom         runtime_sizing   the_default_count_honours_a_quota_given_as_files"
    "graph_foreign_accepted    lagom         graph            an_id_of_another_graph_is_refused_even_with_an_index_in_range"
    "runnable_sync_dropped     lagom-sim     sim_features     a_sync_wakeup_of_a_delayed_wakee_goes_through_preempt_sync"
    "spawn_counted_late        lagom-sim     sim_placement    a_spawn_burst_lands_four_and_four"
    "spawn_counted_late        lagom         runtime_place    a_spawn_burst_lands_four_and_four"
    "monitor_no_last_point     lagom         stall_monitor    tasks_that_yield_to_each_other_are_never_reported"
    "monitor_no_progress_tick  lagom         stall_monitor    long_slices_that_call_cond_resched_are_never_reported"
    "monitor_no_kick           lagom         stall_monitor    the_monitor_kicks_an_idle_worker_for_tasks_that_may_move"
    "timer_keeps_stale         lagom         stall_monitor    a_timer_of_a_task_woken_early_is_no_waiter"
    "monitor_ignores_unwinding lagom         stall_monitor    a_task_that_unwinds_and_holds_its_worker_is_reported_through_on_stall"
    "interpose_passes_through  lagom:interpose  interpose     std_sleeps_in_tasks_let_the_other_tasks_run"
    "host_attr_every_switch    lagom         lib              worker::host::tests::an_unchanged_worker_makes_no_call"
    "host_attr_every_switch    lagom         runtime_host     a_switch_that_changes_nothing_makes_no_call"
    "host_attr_never           lagom         lib              worker::host::tests::the_slice_follows_the_smallest_runnable_one"
    "host_attr_never           lagom         runtime_host     a_task_with_a_short_slice_gives_its_worker_that_slice"
)

export CARGO_TARGET_DIR=${MUTANTS_TARGET_DIR:-target/mutants}
timeout_s=${MUTANT_TIMEOUT:-120}
source .ci/mutant_names.sh
check_mutant_names "$@"
caught=0
missed=0
t_all=$SECONDS
for row in "${MUTANTS[@]}"; do
    read -r name package target test <<<"$row"
    mutant_wanted "$name" || continue
    # `package:features` builds the package with those cargo features.
    features=()
    if [[ $package == *:* ]]; then
        features=(--features "${package#*:}")
        package=${package%%:*}
    fi
    t0=$SECONDS
    mkdir -p "$CARGO_TARGET_DIR/logs"
    log=$CARGO_TARGET_DIR/logs/$name.$target.log
    export LAGOM_MUTANT=$name
    if [ "$target" = lib ]; then which=(--lib); else which=(--test "$target"); fi
    if ! bin=$(cargo test -q -p "$package" "${features[@]}" "${which[@]}" --no-run --message-format=json 2>"$log" \
        | grep '"test":true' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1) \
        || [ -z "$bin" ]; then
        echo "ERROR   $name: the build of $target failed; log: $log"
        missed=$((missed + 1))
        continue
    fi
    rc=0
    timeout "$timeout_s" "$bin" --exact "$test" --test-threads 1 >>"$log" 2>&1 || rc=$?
    took=$((SECONDS - t0))
    if [ "$rc" -eq 0 ]; then
        echo "MISSED  $name: $package $target::$test passed with the mutation (${took} s; log: $log)"
        missed=$((missed + 1))
    elif [ "$rc" -eq 124 ]; then
        echo "HUNG    $name: $target::$test ran past ${timeout_s} s instead of failing (log: $log)"
        missed=$((missed + 1))
    else
        reason=$(grep -m1 -E "panicked|watchdog|lost wakeup|failed|internal error" "$log" | cut -c1-160 || true)
        echo "caught  $name by $target::$test (exit $rc) in ${took} s: $reason"
        caught=$((caught + 1))
    fi
done
echo "$caught caught, $missed missed in $((SECONDS - t_all)) s"
[ "$missed" -eq 0 ]
