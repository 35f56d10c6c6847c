// Package sessclient is the client side of `airlock run --session NAME --
// CMD` that every command of a session pays: it finds the session's
// daemon and hands it the command with this process's stdio.
//
// It is imported by package main only for its init, which runs the
// session command there and exits before the rest of the binary's ~190
// package inits (Go initialises packages in import-path order, each after
// its dependencies, and this one depends on a few low-level standard
// packages only). When anything is not the plain case (no daemon yet,
// --end, a flag it does not know, a parse error, help) it returns and
// main's `run` handles the command in full, starting the daemon if need
// be. It imports only packages the linker schedules early (errors, sort,
// hash/fnv, syscall, unicode/utf8, os, os/signal, strconv): the linker
// orders inits by import path among the packages whose imports are done,
// every package counting (with or without init work), so one import that
// is scheduled late (strings, fmt, encoding/hex, crypto/..., encoding/json,
// golang.org/x/..., path/filepath) would hold this init behind most of the
// binary's. TestSessclientImports holds the list.
package sessclient

import (
	"hash/fnv"
	"os"
	"sort"
	"strconv"
)

// RunFlags are the flags of `airlock run`, true for the boolean ones
// (which take no separate value). It must list exactly the flags main's
// run FlagSet defines (TestSessclientFlagsMatchRun): the key depends on
// telling a flag's value from the command.
var RunFlags = map[string]bool{
	"policy": false, "profile": false, "backend": false, "workspace": false,
	"workdir": false, "rootfs": false, "image": false, "ro": false, "rw": false,
	"deny": false, "tmpfs": false, "env": false, "network": false, "allow": false,
	"allow-request": false, "memory": false, "cpus": false, "pids": false,
	"open-files": false, "timeout": false, "output-limit": false, "json": true,
	"result": false, "audit": false, "allow-degraded": true,
	"writable-config": false, "session": false, "verbose": true, "end": true,
	"session-idle": false, "no-cache": true, "cache": false,
}

// reachFlags choose how a session is reached, not what its sandbox is:
// they never change the session's key.
var reachFlags = map[string]bool{"session": true, "end": true, "session-idle": true, "json": true, "result": true, "verbose": true}

// Flag is one flag as given: its name and its value ("true" for a
// boolean given bare).
type Flag struct{ Name, Value string }

// ParseFlags splits run's arguments as package flag does: the flags, and
// the rest (the command). ok is false for anything flag would refuse or
// treat specially (an unknown flag, a missing value, -h).
func ParseFlags(args []string) (flags []Flag, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			return flags, args[i:], true
		}
		if a == "--" {
			return flags, args[i+1:], true
		}
		name := a[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil, nil, false
		}
		value, inline := "", false
		for j := 0; j < len(name); j++ {
			if name[j] == '=' {
				name, value, inline = name[:j], name[j+1:], true
				break
			}
		}
		isBool, known := RunFlags[name]
		switch {
		case !known:
			return nil, nil, false
		case isBool && !inline:
			value = "true"
		case isBool:
			b, err := strconv.ParseBool(value)
			if err != nil {
				return nil, nil, false
			}
			value = strconv.FormatBool(b)
		case !inline:
			if i+1 >= len(args) {
				return nil, nil, false
			}
			i++
			value = args[i]
		}
		flags = append(flags, Flag{name, value})
	}
	return flags, nil, true
}

// Lookup is the last value given for name, and whether it was given.
func Lookup(flags []Flag, name string) (string, bool) {
	v, ok := "", false
	for _, f := range flags {
		if f.Name == name {
			v, ok = f.Value, true
		}
	}
	return v, ok
}

// Key names one warm sandbox: the user, the working directory (the
// workspace by default), NAME, every flag that shapes the sandbox (as
// given, in a fixed order) and the policy file's content, so a changed
// policy or flag gets a new sandbox instead of reusing one made under the
// old rules. FNV-128a, not SHA-256: the key is a name, not a secret
// (who may attach is the socket directory's mode and SO_PEERCRED), and
// crypto/sha256 initialises late.
func Key(flags []Flag) string {
	h := fnv.New128a()
	cwd, _ := os.Getwd()
	write := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	write("airlock-session-v2")
	write(strconv.Itoa(os.Getuid()))
	write(cwd)
	name, _ := Lookup(flags, "session")
	write(name)
	var set []string
	for _, f := range flags {
		if !reachFlags[f.Name] {
			set = append(set, f.Name+"="+f.Value)
		}
	}
	sort.Strings(set)
	for _, s := range set {
		write(s)
	}
	if file, ok := Lookup(flags, "policy"); ok && file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			write("unreadable:" + err.Error())
		}
		h.Write(b)
	}
	const digits = "0123456789abcdef"
	var out []byte
	for _, c := range h.Sum(nil)[:12] {
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}
