//go:build !linux

package main

func raiseNoFile() {}
