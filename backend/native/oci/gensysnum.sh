#!/bin/sh
# Regenerates sysnum_amd64_linux.go from golang.org/x/sys's syscall table
# (go generate runs it): syscall names as seccomp profiles spell them.
set -eu
f="$(go env GOMODCACHE)/golang.org/x/sys@$(go list -m -f '{{.Version}}' golang.org/x/sys)/unix/zsysnum_linux_amd64.go"
{
	echo '// Code generated from golang.org/x/sys/unix zsysnum_linux_amd64.go by gensysnum.sh; DO NOT EDIT.'
	echo
	echo '//go:build linux && amd64'
	echo
	echo 'package oci'
	echo
	echo '// syscallNumbers maps syscall names (as seccomp profiles spell them) to'
	echo '// their x86_64 numbers.'
	echo 'var syscallNumbers = map[string]int{'
	grep -E '^\s+SYS_[A-Z0-9_]+\s+= [0-9]+' "$f" | awk '{printf "\t\"%s\": %s,\n", tolower(substr($1,5)), $3}'
	echo '}'
} > sysnum_amd64_linux.go
gofmt -w sysnum_amd64_linux.go
