#!/usr/bin/env bash
# Start-up cost of the airlock binary (issues 22 and 25), before and after
# a change, in one alternating run: BEFORE=path/to/old/airlock names the
# binary to compare bin/airlock with. Per pair: a session command
# (/bin/true and git status in a 2,000-file repository) beside bwrap or
# bare, cold `airlock run -- /bin/true` beside bwrap, and `airlock
# version`. N sets the runs per command; ratios are of medians.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-40}
root=$PWD
: "${BEFORE:?set BEFORE to the airlock binary to compare with}"
mkdir -p out/bench
go build -o out/bench/compare ./bench/compare
cmp=$root/out/bench/compare
old=$(readlink -f "$BEFORE")
new=$root/bin/airlock
work=$(mktemp -d /tmp/airlock-bench-startup.XXXXXX)
cleanup() {
	(cd "$work/repo" 2>/dev/null && "$old" run --session bench --end; "$new" run --session bench --end) || true
	rm -rf "$work"
}
trap cleanup EXIT
bwrap=(bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent)

mkdir -p "$work/repo"
cd "$work/repo"
git init -q
for d in $(seq 1 40); do
	mkdir -p "d$d"
	for f in $(seq 1 50); do echo "$d $f" > "d$d/f$f.txt"; done
done
git add -A
git -c user.name=bench -c user.email=bench@example.invalid commit -qm files
"$old" run --session bench -- /bin/true # start both sessions (not timed)
"$new" run --session bench -- /bin/true
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== session /bin/true: before, after, bwrap"
"$cmp" -n "$N" -name-a before -name-b after -name-c bwrap -json "$root/out/bench/startup-session.json" -- \
	"$old" run --session bench -- /bin/true ::: "$new" run --session bench -- /bin/true ::: "${bwrap[@]}" /bin/true
echo
echo "== git status, 2,000 files, under a session: before, after, bare"
"$cmp" -n "$N" -name-a before -name-b after -name-c bare -json "$root/out/bench/startup-git.json" -- \
	"$old" run --session bench -- git status --porcelain ::: "$new" run --session bench -- git status --porcelain ::: git status --porcelain
echo
echo "== cold run /bin/true: before, after, bwrap"
"$cmp" -n "$N" -name-a before -name-b after -name-c bwrap -json "$root/out/bench/startup-cold.json" -- \
	"$old" run -- /bin/true ::: "$new" run -- /bin/true ::: "${bwrap[@]}" /bin/true
echo
echo "== airlock version: before, after"
"$cmp" -n "$N" -name-a before -name-b after -json "$root/out/bench/startup-version.json" -- \
	"$old" version ::: "$new" version
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
