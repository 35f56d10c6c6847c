//go:build !linux

package main

func removeCgroupParents(string) {}
