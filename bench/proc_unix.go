//go:build unix

package main

import "syscall"

// childProcAttr puts the server child in a process group of its own.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
