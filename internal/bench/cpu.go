package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cpuTimes is CPU time used so far by this process and by the Postgres backends serving the
// bench database (same machine: read from /proc).
type cpuTimes struct {
	self, postgres time.Duration
	ok             bool
}

// clockTick is Linux's USER_HZ.
const clockTick = 10 * time.Millisecond

func (e *env) cpu(ctx context.Context) cpuTimes {
	var c cpuTimes
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return c
	}
	c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	admin, err := pgx.Connect(ctx, e.adminDB)
	if err != nil {
		return c
	}
	defer admin.Close(ctx)
	rows, err := admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", e.dbName)
	if err != nil {
		return c
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return c
	}
	for _, pid := range pids {
		c.postgres += procCPU(int(pid))
	}
	c.ok = true
	return c
}

// procCPU reads a process's user + system time from /proc/PID/stat.
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command may hold spaces; fields start after the last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * clockTick
}
