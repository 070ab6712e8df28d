//go:build !linux

package extract

import (
	"os/exec"
	"syscall"
)

// Outside Linux the child runs under the parent's deadline only.

func childAttr() *syscall.SysProcAttr { return nil }

func exitSignal(*exec.ExitError) syscall.Signal { return 0 }

func limitSelf(int, int64) error { return nil }
