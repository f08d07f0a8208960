#!/usr/bin/env bash
# Every commit subject since the project's new era is at most 72 characters; the story goes in
# the body. Checks the commits after BASE (f03da4d, the first commit held to the rule) up to
# HEAD, merges included, and lists each subject that is too long.
#
#   bash .ci/commit_subjects.sh [REV]    # the commits after BASE up to REV (default HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8 # count characters, not bytes

base=f03da4d
max=72
rev=${1:-HEAD}
# Commits already on main when this check came, whose subjects cannot be reworded any more.
# Nothing is added here: a new commit rewords its subject instead.
exempt=(
    65fb775 # lagom::sync: Arc, Weak, atomic re-exported; … (80 characters)
    15bff55 # CpuMap levels carry the kernel's domain flags; … (74)
    d58d7aa # One activation-flags rule; ENQUEUE_MIGRATED clears … (75)
    06656fc # The book's kernel map names the kernel lagom models … (78)
)

if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
    echo "$0: commit $base is not in this clone's history; a shallow clone? fetch the whole" \
        "history (git fetch --unshallow) and run again" >&2
    exit 2
fi
if ! git merge-base --is-ancestor "$base" "$rev"; then
    echo "$0: $rev does not descend from $base; nothing to check against" >&2
    exit 2
fi

n=0
long=0
while IFS= read -r -d '' entry; do
    hash=${entry%% *}
    subject=${entry#* }
    n=$((n + 1))
    [ ${#subject} -gt $max ] || continue
    for e in "${exempt[@]}"; do
        [[ $hash == "$e"* ]] && continue 2
    done
    long=$((long + 1))
    echo "too long (${#subject} > $max): ${hash:0:12} $subject"
done < <(git log -z --format='%H %s' "$base..$rev")

if [ $long -gt 0 ]; then
    echo "$long of $n commit subjects since $base are longer than $max characters: shorten the" \
        "subject (git rebase -i, reword) and put the story in the body"
    exit 1
fi
echo "commit subjects: $n since $base, none longer than $max characters"
