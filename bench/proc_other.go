//go:build !unix

package main

import "syscall"

// childProcAttr leaves the server child in this process's group.
func childProcAttr() *syscall.SysProcAttr { return nil }
