//go:build !linux

package soak

import "syscall"

// procAttr is nil: only Linux kills a child with its parent.
func procAttr() *syscall.SysProcAttr { return nil }
