#!/usr/bin/env bash
# Sessions (issue 25): per-command cost of `airlock run --session` beside
# bwrap, git status in a 2,000-file repo under a session beside bare, and
# cold `airlock run` beside bwrap. Each pair alternates in one run
# (bench/compare); N sets the runs per command.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
root=$PWD
mkdir -p out/bench
go build -o out/bench/compare ./bench/compare
cmp=$root/out/bench/compare
bin=$root/bin/airlock
work=$(mktemp -d /tmp/airlock-bench-session.XXXXXX)
cleanup() {
	(cd "$work/repo" 2>/dev/null && "$bin" run --session bench --end) || true
	rm -rf "$work"
}
trap cleanup EXIT
bwrap=(bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent)

# A repository of 2,000 files in 40 directories, committed.
mkdir -p "$work/repo"
cd "$work/repo"
git init -q
for d in $(seq 1 40); do
	mkdir -p "d$d"
	for f in $(seq 1 50); do echo "$d $f" > "d$d/f$f.txt"; done
done
git add -A
git -c user.name=bench -c user.email=bench@example.invalid commit -qm files
"$bin" run --session bench -- /bin/true # start the session (not timed)

echo "== session /bin/true per command vs bwrap"
"$cmp" -n "$N" -name-a session -name-b bwrap -json "$root/out/bench/session-true.json" -- \
	"$bin" run --session bench -- /bin/true ::: "${bwrap[@]}" /bin/true
echo
echo "== git status in a 2,000-file repo: session vs bare"
"$cmp" -n "$N" -name-a session -name-b bare -json "$root/out/bench/session-git.json" -- \
	"$bin" run --session bench -- git status --porcelain ::: git status --porcelain
echo
echo "== cold airlock run /bin/true vs bwrap"
"$cmp" -n "$N" -name-a cold -name-b bwrap -json "$root/out/bench/session-cold.json" -- \
	"$bin" run -- /bin/true ::: "${bwrap[@]}" /bin/true
