//go:build !linux

package routine

import (
	"errors"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return nil }

// limitMemory is only implemented on Linux: elsewhere a lambda does not run.
func limitMemory(int64) error { return errors.New("lambda steps need Linux (setrlimit)") }
