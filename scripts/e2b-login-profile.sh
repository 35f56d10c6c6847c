#!/usr/bin/env bash
# Makes the login shell of an E2B template start without a fork, keeping
# what it does. E2B's SDK runs every command as `bash -l -c CMD`, so the
# login path is paid on every commands.run. Debian's login path forks twice:
#
#   /etc/profile   "$(id -u)" (a fork and an exec of id) to choose PATH
#                  (and, for a non-bash interactive shell, PS1)
#   /root/.profile mesg n 2>/dev/null || true
#
# Rewritten here, in the root filesystem ROOT (an mmdebstrap customize
# hook: e2b-login-profile.sh "$1"):
#
#   * the effective uid is read from /proc/self/status by the shell's own
#     read builtin (the Uid: line, its second field: the shell's effective
#     uid, which is what id -u, a child of that shell, prints); only where
#     that file cannot be read does the shell ask id(1) as before. Not
#     $EUID: bash takes EUID from its environment when one is there
#     (`env EUID=0 bash -c 'echo $EUID'` prints 0 for any user), and dash
#     has none. The helper variables are unset before /etc/profile.d runs.
#   * mesg runs only when stdin or stdout is a terminal: mesg n looks for a
#     terminal on fds 0, 1 and 2 (2 is /dev/null here) and without one
#     exits 2 having done nothing, which `|| true` hides.
#
# Fails (and so fails the build) when the files are not Debian's as
# expected, rather than leaving a template half rewritten.
set -euo pipefail
root=${1:?usage: $0 ROOTFS}
profile=$root/etc/profile
rootprofile=$root/root/.profile

grep -q '"$(id -u)"' "$profile" || { echo "e2b-login-profile: $profile has no \"\$(id -u)\"" >&2; exit 1; }
grep -q '^if \[ -d /etc/profile.d \]; then$' "$profile" || { echo "e2b-login-profile: $profile has no profile.d loop" >&2; exit 1; }
awk '
BEGIN { first = 1 }
first && /^if / {
	print "# Airlock (scripts/e2b-login-profile.sh): the effective uid without a fork:"
	print "# the Uid: line of /proc/self/status (this shell), else id -u as before."
	print "__airlock_euid="
	print "if [ -r /proc/self/status ]; then"
	print "  while read -r __airlock_k __airlock_r __airlock_e __airlock_x; do"
	print "    if [ \"$__airlock_k\" = Uid: ]; then __airlock_euid=$__airlock_e; break; fi"
	print "  done </proc/self/status"
	print "fi"
	print "[ -n \"$__airlock_euid\" ] || __airlock_euid=$(id -u)"
	print ""
	first = 0
}
/^if \[ -d \/etc\/profile.d \]; then$/ {
	print "unset __airlock_euid __airlock_k __airlock_r __airlock_e __airlock_x"
	print ""
}
{ gsub(/"\$\(id -u\)"/, "\"$__airlock_euid\""); print }
' "$profile" >"$profile.airlock"
if grep -qF '"$(id -u)"' "$profile.airlock"; then
	echo "e2b-login-profile: $profile: an id -u is left" >&2
	exit 1
fi
cat "$profile.airlock" >"$profile" # keeps the file's owner and mode
rm "$profile.airlock"

if [ -f "$rootprofile" ]; then
	mesg='mesg n 2> /dev/null || true'
	grep -qxF "$mesg" "$rootprofile" || { echo "e2b-login-profile: $rootprofile has no mesg line" >&2; exit 1; }
	awk -v m="$mesg" '$0 == m { print "# Airlock (scripts/e2b-login-profile.sh): no fork without a terminal."; print "if [ -t 0 ] || [ -t 1 ]; then " m "; fi"; next } { print }' \
		"$rootprofile" >"$rootprofile.airlock"
	cat "$rootprofile.airlock" >"$rootprofile"
	rm "$rootprofile.airlock"
fi
