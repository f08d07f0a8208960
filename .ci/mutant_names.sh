# Sourced by loom-tests/mutants.sh and runtime/tests/mutants.sh: which of their MUTANTS
# rows (first word: the mutant's name) the command line asked for.

# Exit 2, listing the mutants, when an argument names none of them (a typo would otherwise
# run nothing and pass). Sets `wanted` to the arguments.
check_mutant_names() {
    wanted=("$@")
    local w
    for w in "${wanted[@]}"; do
        if ! printf '%s\n' "${MUTANTS[@]}" | awk '{print $1}' | grep -qxF -- "$w"; then
            echo "$0: no mutant named '$w'; the mutants are:" >&2
            printf '%s\n' "${MUTANTS[@]}" | awk '{print "  " $1}' | sort -u >&2
            exit 2
        fi
    done
}

# Whether mutant $1 runs: every mutant when no names were given, else the named ones.
mutant_wanted() {
    [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " =~ " $1 " ]]
}
