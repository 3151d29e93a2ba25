//go:build linux

package soak

import "syscall"

// procAttr makes a serve process die with the soak, should the soak die
// without stopping it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
