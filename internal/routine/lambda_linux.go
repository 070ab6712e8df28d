package routine

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// childAttr kills the lambda's process when the thread that started it ends.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// limitMemory sets a hard limit of mem bytes of address space beyond what the runtime has
// mapped already (a process cannot raise it again).
func limitMemory(mem int64) error {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return err
	}
	fields := bytes.Fields(raw)
	if len(fields) == 0 {
		return os.ErrInvalid
	}
	pages, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil {
		return err
	}
	size := pages * int64(os.Getpagesize())
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(size + mem), Max: uint64(size + mem)})
}
