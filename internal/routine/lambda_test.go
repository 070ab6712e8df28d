package routine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLambdaCaps(t *testing.T) {
	t.Parallel()
	c := sampleContext()
	l := Lambda{Timeout: 2 * time.Second, Memory: 64 << 20, MaxSteps: 1_000_000}
	ctx := context.Background()

	res, err := l.Run(ctx, "def main(ctx):\n    return {'passed': ctx['task']['title'] == 't', 'output': 'ok ' + ctx['routine_name'], 'data': {'n': len(ctx['step_results'])}}\n", c)
	require.NoError(t, err)
	require.Equal(t, &LambdaResult{Passed: true, Output: "ok n", Data: map[string]any{"n": float64(1)}}, res)

	cases := []struct{ name, script, want string }{
		{"endless loop", "def main(ctx):\n    n = 0\n    for i in range(1000000000):\n        n += 1\n    return {}\n", "step limit exceeded"},
		{"endless loop, time", "def main(ctx):\n    n = 0\n    for i in range(1000000000):\n        n += 1\n    return {}\n", "time limit"},
		{"unbounded allocation", "def main(ctx):\n    x = 'a' * (1 << 20)\n    l = []\n    for i in range(100000):\n        l.append(x + str(i))\n    return {}\n", "memory limit"},
		{"one huge allocation", "def main(ctx):\n    x = 'a' * (1 << 28)\n    return {'output': x}\n", "memory limit"},
		{"no files", "def main(ctx):\n    return {'output': open('/etc/passwd').read()}\n", "undefined: open"},
		{"no load", "load('os.star', 'x')\ndef main(ctx):\n    return {}\n", "load"},
		{"no network", "def main(ctx):\n    return {'output': http.get('http://127.0.0.1')}\n", "undefined: http"},
		{"bad result", "def main(ctx):\n    return 3\n", "must return a dict"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := l
			if tc.name == "endless loop, time" {
				l.MaxSteps, l.Timeout = 1<<62, 300*time.Millisecond
			}
			_, err := l.Run(ctx, tc.script, c)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
