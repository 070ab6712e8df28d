package extract

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sandbox runs Extract in a child process: the agentry binary started again as
// `agentry extract CPU_SECONDS MEMORY_BYTES`, with an environment of its own (no secrets of the
// parent), at low priority, on one core. The child limits itself with setrlimit before it reads
// a byte (RLIMIT_CPU and RLIMIT_AS: a process cannot raise a hard limit again) and the parent
// kills it at the deadline and when it ends itself. A file that takes more than that fails as an
// *Error naming the limit; the parent is never the one parsing. The zero value is ready to use.
type Sandbox struct {
	// Command starts the child; its first argument must make the binary call Main (see init).
	// Default: this executable with the argument "extract".
	Command []string
	// Timeout is the wall-clock deadline of one Run. Default 10 s.
	Timeout time.Duration
	// CPU is the CPU time the child may use. Default: Timeout.
	CPU time.Duration
	// Memory is the address space the child may add to what it has mapped at start (the Go
	// runtime maps address space ahead in chunks, so the bound is a few tens of MiB looser).
	// Default 1 GiB.
	Memory int64
}

// Outcome is what one file of a Run yields: its Content, or Err saying why it was refused.
type Outcome struct {
	Content Content
	Err     string
}

const (
	childArg = "extract"
	// childEnv marks the child's environment, so that only a process started by a Sandbox runs
	// the child's side from init (a test binary given "extract" by chance does not).
	childEnv = "AGENTRY_EXTRACT_CHILD"
	// maxChildOutput bounds what the parent reads back: the text of MaxFiles files, and more.
	maxChildOutput = MaxFiles*(MaxText+1024) + 64<<10
	// MaxFiles is the most files one Run reads.
	MaxFiles = 16
)

// init runs the child's side when this binary was started by a Sandbox, before anything else
// of the program: a test binary needs no hook of its own, and the agentry binary's `extract`
// subcommand (for a person trying a file by hand) calls Main itself.
func init() {
	if len(os.Args) > 1 && os.Args[1] == childArg && os.Getenv(childEnv) == "1" {
		os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
}

func (s Sandbox) defaults() Sandbox {
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Second
	}
	if s.CPU <= 0 {
		s.CPU = s.Timeout
	}
	if s.Memory <= 0 {
		s.Memory = 1 << 30
	}
	return s
}

// Run reads files in one child process and returns one Outcome per file, in order. A file the
// child could not finish within the limits ends the Run with an *Error naming it by index
// (ErrorAt); ctx's end kills the child and returns ctx's error; a child that cannot be started
// is an error of the server, not of the files.
func (s Sandbox) Run(ctx context.Context, files []File) ([]Outcome, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if len(files) > MaxFiles {
		return nil, refuse("%d files; at most %d are read at once", len(files), MaxFiles)
	}
	s = s.defaults()
	argv := s.Command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("extract: find executable: %w", err)
		}
		argv = []string{exe, childArg}
	}
	var input bytes.Buffer
	if err := gob.NewEncoder(&input).Encode(files); err != nil {
		return nil, fmt.Errorf("extract: encode input: %w", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cpuSeconds := max(1, int(s.CPU.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(runCtx, argv[0], append(argv[1:], strconv.Itoa(cpuSeconds), strconv.FormatInt(s.Memory, 10))...)
	cmd.Env = []string{childEnv + "=1", "GOMAXPROCS=1", "GOTRACEBACK=single"}
	cmd.Stdin = &input
	var stderr limitedBuffer
	stderr.max = 4096
	cmd.Stderr = &stderr
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("extract: start %s: %w", argv[0], err)
	}
	dec := gob.NewDecoder(io.LimitReader(stdout, maxChildOutput))
	out := make([]Outcome, 0, len(files))
	for len(out) < len(files) {
		var o Outcome
		if err := dec.Decode(&o); err != nil {
			break
		}
		out = append(out, o)
	}
	_, _ = io.Copy(io.Discard, stdout)
	waitErr := cmd.Wait()
	if len(out) == len(files) {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var why string
	var exit *exec.ExitError
	switch {
	case runCtx.Err() != nil:
		why = fmt.Sprintf("could not be read within %s", s.Timeout)
	case errors.As(waitErr, &exit) && exitSignal(exit) == syscall.SIGXCPU:
		why = fmt.Sprintf("took more than %d s of CPU to read", cpuSeconds)
	case strings.Contains(stderr.String(), "out of memory"):
		why = fmt.Sprintf("needed more than %d MiB of memory to read", s.Memory>>20)
	case waitErr != nil:
		why = fmt.Sprintf("could not be read (the reader stopped: %v)", waitErr)
	default:
		why = "could not be read (the reader stopped early)"
	}
	return out, &Error{Reason: why, Index: len(out)}
}

// Main is the child's side: it limits itself to cpuSeconds of CPU and memoryBytes more of
// address space (args), then reads gob-encoded []File from stdin and writes one Outcome per
// file to stdout as each is done. It returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cpu, mem := 10, int64(1<<30)
	if len(args) >= 2 {
		var err1, err2 error
		cpu, err1 = strconv.Atoi(args[0])
		mem, err2 = strconv.ParseInt(args[1], 10, 64)
		if err1 != nil || err2 != nil || cpu <= 0 || mem <= 0 {
			fmt.Fprintln(stderr, "usage: agentry extract [CPU_SECONDS MEMORY_BYTES] < files (gob)")
			return 2
		}
	}
	if err := limitSelf(cpu, mem); err != nil {
		fmt.Fprintf(stderr, "extract: limits: %v\n", err)
		return 1
	}
	var files []File
	if err := gob.NewDecoder(io.LimitReader(stdin, MaxFiles*(MaxFileBytes+1024))).Decode(&files); err != nil {
		fmt.Fprintf(stderr, "extract: read input: %v\n", err)
		return 1
	}
	enc := gob.NewEncoder(stdout)
	for _, f := range files {
		c, err := Extract(f)
		o := Outcome{Content: c}
		if err != nil {
			o = Outcome{Err: err.Error()}
		}
		if err := enc.Encode(o); err != nil {
			fmt.Fprintf(stderr, "extract: write: %v\n", err)
			return 1
		}
	}
	return 0
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
