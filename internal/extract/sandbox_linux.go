package extract

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// childAttr kills the child when the thread that started it ends, so no reader outlives the
// server.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func exitSignal(e *exec.ExitError) syscall.Signal {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// limitSelf sets hard limits the process cannot raise again: cpu seconds of CPU time (SIGXCPU,
// then SIGKILL a second later) and mem bytes of address space beyond what the runtime has
// mapped already. It also lowers the process's priority, so a reader yields to the server.
func limitSelf(cpu int, mem int64) error {
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: uint64(cpu), Max: uint64(cpu + 1)}); err != nil {
		return err
	}
	size, err := addressSpace()
	if err != nil {
		return err
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(size + mem), Max: uint64(size + mem)}); err != nil {
		return err
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 10)
	return nil
}

// addressSpace is the process's virtual memory size in bytes (/proc/self/statm's first field).
func addressSpace() (int64, error) {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	fields := bytes.Fields(raw)
	if len(fields) == 0 {
		return 0, os.ErrInvalid
	}
	pages, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}
