package routine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Lambda limits: a LAMBDA step's script runs in a child process (this binary started again)
// that limits its own address space, under a step cap and a wall-clock deadline.
const (
	LambdaMaxSteps = 10_000_000
	LambdaTimeout  = 5 * time.Second
	LambdaMemory   = 256 << 20
)

const (
	lambdaArg = "routine-lambda"
	// lambdaEnv marks the child's environment, so that only a process started by RunLambda
	// runs the child's side from init.
	lambdaEnv = "AGENTRY_LAMBDA_CHILD"
)

// LambdaResult is what a script's main(ctx) returned.
type LambdaResult struct {
	Passed bool           `json:"passed"`
	Output string         `json:"output"`
	Data   map[string]any `json:"data"`
}

// Lambda runs LAMBDA scripts. The zero value uses the defaults above.
type Lambda struct {
	MaxSteps uint64
	Timeout  time.Duration
	Memory   int64
	// Command starts the child; default: this executable with lambdaArg.
	Command []string
}

type lambdaInput struct {
	Script   string          `json:"script"`
	Context  json.RawMessage `json:"context"`
	MaxSteps uint64          `json:"max_steps"`
	Timeout  time.Duration   `json:"timeout"`
	Memory   int64           `json:"memory"`
}

type lambdaOutput struct {
	Result *LambdaResult `json:"result,omitempty"`
	Error  string        `json:"error,omitempty"`
}

func init() {
	if len(os.Args) > 1 && os.Args[1] == lambdaArg && os.Getenv(lambdaEnv) == "1" {
		os.Exit(lambdaMain(os.Stdin, os.Stdout))
	}
}

// lambdaMain is the child's side: read the input, limit the process, run the script, write the
// outcome.
func lambdaMain(in io.Reader, out io.Writer) int {
	var li lambdaInput
	if err := json.NewDecoder(in).Decode(&li); err != nil {
		fmt.Fprintln(out, `{"error":"bad input"}`)
		return 1
	}
	if err := limitMemory(li.Memory); err != nil {
		_ = json.NewEncoder(out).Encode(lambdaOutput{Error: "cannot limit memory: " + err.Error()})
		return 1
	}
	res, err := runScript(li.Script, li.Context, li.MaxSteps, li.Timeout)
	o := lambdaOutput{Result: res}
	if err != nil {
		o = lambdaOutput{Error: err.Error()}
	}
	_ = json.NewEncoder(out).Encode(o)
	return 0
}

// CompileScript reports a script's syntax errors, and a missing main (saveRoutine).
func CompileScript(script string) error {
	f, err := (&syntax.FileOptions{}).Parse("lambda.star", script, 0)
	if err != nil {
		return err
	}
	for _, st := range f.Stmts {
		if d, ok := st.(*syntax.DefStmt); ok && d.Name.Name == "main" {
			return nil
		}
	}
	return errors.New("the script must define main(ctx)")
}

// runScript runs script's main(ctx) in this process with the step cap and the deadline (a
// thread cancel). No load, no file system, no network: the script has only Starlark's
// built-ins and json.
func runScript(script string, ctxJSON json.RawMessage, maxSteps uint64, timeout time.Duration) (*LambdaResult, error) {
	thread := &starlark.Thread{Name: "lambda"}
	thread.SetMaxExecutionSteps(maxSteps)
	timer := time.AfterFunc(timeout, func() { thread.Cancel(fmt.Sprintf("time limit of %s exceeded", timeout)) })
	defer timer.Stop()
	predeclared := starlark.StringDict{"json": starlarkjson.Module}
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "lambda.star", script, predeclared)
	if err != nil {
		return nil, scriptError(err)
	}
	main, ok := globals["main"].(starlark.Callable)
	if !ok {
		return nil, errors.New("the script must define main(ctx)")
	}
	decode := starlarkjson.Module.Members["decode"]
	ctxVal, err := starlark.Call(thread, decode, starlark.Tuple{starlark.String(ctxJSON)}, nil)
	if err != nil {
		return nil, scriptError(err)
	}
	v, err := starlark.Call(thread, main, starlark.Tuple{ctxVal}, nil)
	if err != nil {
		return nil, scriptError(err)
	}
	if _, ok := v.(*starlark.Dict); !ok {
		return nil, fmt.Errorf("main must return a dict {passed, output, data}, not %s", v.Type())
	}
	enc, err := starlark.Call(thread, starlarkjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, scriptError(err)
	}
	var res LambdaResult
	if err := json.Unmarshal([]byte(enc.(starlark.String)), &res); err != nil {
		return nil, fmt.Errorf("main returned %s: passed must be a bool, output a string, data a dict", enc)
	}
	return &res, nil
}

func scriptError(err error) error {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		msg := ee.Msg
		if strings.Contains(msg, "too many steps") {
			return fmt.Errorf("step limit exceeded: %s", msg)
		}
		return fmt.Errorf("script failed: %s", ee.Backtrace())
	}
	return fmt.Errorf("script failed: %v", err)
}

// Run runs script's main(ctx) in a child process under the caps. A script that breaks a cap or
// fails returns an error saying which; an error starting the child is wrapped in errChild.
func (l Lambda) Run(ctx context.Context, script string, c Context) (*LambdaResult, error) {
	if l.MaxSteps == 0 {
		l.MaxSteps = LambdaMaxSteps
	}
	if l.Timeout <= 0 {
		l.Timeout = LambdaTimeout
	}
	if l.Memory <= 0 {
		l.Memory = LambdaMemory
	}
	ctxJSON, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(lambdaInput{Script: script, Context: ctxJSON, MaxSteps: l.MaxSteps, Timeout: l.Timeout, Memory: l.Memory})
	if err != nil {
		return nil, err
	}
	cmdline := l.Command
	if len(cmdline) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errChild, err)
		}
		cmdline = []string{exe, lambdaArg}
	}
	runCtx, cancel := context.WithTimeout(ctx, l.Timeout+2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(runCtx, cmdline[0], cmdline[1:]...)
	cmd.Env = []string{lambdaEnv + "=1", "GOMAXPROCS=1", "GOGC=50"}
	cmd.Dir = os.TempDir()
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = childAttr()
	runErr := cmd.Run()
	var out lambdaOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err == nil && (out.Result != nil || out.Error != "") {
		if out.Error != "" {
			return nil, errors.New(out.Error)
		}
		return out.Result, nil
	}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case runCtx.Err() != nil:
		return nil, fmt.Errorf("time limit of %s exceeded", l.Timeout)
	case strings.Contains(stderr.String(), "out of memory") || strings.Contains(stderr.String(), "cannot allocate"):
		return nil, fmt.Errorf("memory limit of %d MiB exceeded", l.Memory>>20)
	case runErr != nil:
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			return nil, fmt.Errorf("the script was stopped (%s); it may have exceeded the memory limit of %d MiB", ee.ProcessState.String(), l.Memory>>20)
		}
		return nil, fmt.Errorf("%w: %v", errChild, runErr)
	}
	return nil, fmt.Errorf("%w: no answer", errChild)
}

var errChild = errors.New("cannot run the lambda's process")
