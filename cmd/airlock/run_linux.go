package main

// checkRunHost: every backend of `airlock run` can run on Linux (whether
// this host has what it needs is the backend's probe to say).
func checkRunHost(string) error { return nil }
