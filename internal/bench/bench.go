// Package bench is `agentry bench`: it measures agentry's overhead against baselines run in the
// same process, on the same machine, alternately, and checks agentry's performance goals (the
// goal of each check; docs/PERFORMANCE.md describes them).
//
// Each measure runs a warm-up of both sides, then several rounds of baseline and agentry in
// alternating order (AB, BA, ...). Latencies come from open-loop load (a constant arrival rate,
// measured from the intended send time, so a stall shows up as latency instead of lowering the
// load) and percentiles use every sample; throughputs come from closed-loop load (the ceiling).
//
// The real path is a whole agentry process (API and workers, app.New) on a fresh database,
// talking to an in-process fake LLM (FakeLLM) through the real OpenAI provider code, with
// clients using GraphQL over HTTP and WebSockets. The baselines are a bare River client with a
// no-op worker (same queue settings, worker count and pool), a direct client of the fake LLM
// (the same provider code), a bare net/http JSON handler behind the same middleware and
// authentication, and raw go-redis pub/sub.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a bench run. Zero fields take the defaults of a full run.
type Options struct {
	// DatabaseURL names the Postgres server (a fresh database is created on it and dropped
	// after); RedisURL the Redis server.
	DatabaseURL string
	RedisURL    string
	// Quick runs one short round per measure (about a minute in all).
	Quick bool
	// Window multiplies every measuring window (tests use a small one); 0 means 1.
	Window float64
	// ScaleMeasures runs the scale measures (SUBS-CHURN) instead of the performance ones.
	ScaleMeasures bool
	// Connections is SUBS-CHURN's count of WebSockets opened and closed (default 100,000;
	// quick 10,000).
	Connections int
	// Rounds of baseline and agentry per measure (default 3, quick 1).
	Rounds int
	// Tenants signed up for the real path (default 8): conversations and sockets spread over
	// them.
	Tenants int
	// Clients is the closed-loop concurrency of E2E-TPUT and BUDGET (default 64: more than
	// the 50 workers, so they never wait for work).
	Clients int
	// Subscribers are FANOUT's subscriber counts (default 1, 10, 100); the latency check uses
	// the last.
	Subscribers []int
	// Only, when set, runs just these measures (by id, e.g. "Q-LAT").
	Only []string
	// ProfileDir, when set, receives a CPU profile of each measure's last agentry segment.
	ProfileDir string
	// AppEnv overrides agentry's configuration (environment variable names).
	AppEnv map[string]string
	// LogStatements makes Postgres log every statement on the bench database with its duration
	// (diagnostics: the server log shows what a turn runs and where it waits).
	LogStatements bool
	// Progress receives a line per step (nil: none).
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Window <= 0 {
		o.Window = 1
	}
	if o.Connections <= 0 {
		o.Connections = 100_000
		if o.Quick {
			o.Connections = 10_000
		}
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
		if o.Quick {
			o.Rounds = 1
		}
	}
	if o.Tenants <= 0 {
		o.Tenants = 8
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if len(o.Subscribers) == 0 {
		o.Subscribers = []int{1, 10, 100}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// window returns a measuring window: full in a full run, quick otherwise, times Window, and
// at least minWindow.
func (o *Options) window(full, quick time.Duration) time.Duration {
	d := full
	if o.Quick {
		d = quick
	}
	return max(time.Duration(float64(d)*o.Window), minWindow)
}

// floor is the shortest window of a measure whose operations take long: d, or half of it in a
// scaled-down run (the harness's own test).
func (o *Options) floor(d time.Duration) time.Duration {
	if o.Window < 1 {
		return d / 2
	}
	return d
}

// minWindow is the shortest measuring window: several turns must fit even on a busy machine.
const minWindow = 300 * time.Millisecond

func (o *Options) runs(id string) bool {
	if len(o.Only) == 0 {
		return true
	}
	for _, m := range o.Only {
		if strings.EqualFold(m, id) {
			return true
		}
	}
	return false
}

// Check is one line of the results: a figure of a measure against its goal.
type Check struct {
	Measure  string  `json:"measure"`
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline"`
	Agentry  float64 `json:"agentry"`
	// Ratio is agentry / baseline (NaN when it means nothing).
	Ratio float64 `json:"ratio"`
	Goal  string  `json:"goal"`
	// Status is "pass", "fail" or "n/a".
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// MarshalJSON writes NaN figures as null.
func (c Check) MarshalJSON() ([]byte, error) {
	num := func(f float64) any {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return math.Round(f*10000) / 10000
	}
	return json.Marshal(map[string]any{
		"measure": c.Measure, "name": c.Name, "unit": c.Unit, "baseline": num(c.Baseline), "agentry": num(c.Agentry),
		"ratio": num(c.Ratio), "goal": c.Goal, "status": c.Status, "note": c.Note,
	})
}

// Report is a whole run's results.
type Report struct {
	Machine  Machine       `json:"machine"`
	Quick    bool          `json:"quick"`
	Rounds   int           `json:"rounds"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"durationNs"`
	Checks   []Check       `json:"checks"`
	// Extra holds figures that have no goal but explain the ones that do.
	Extra map[string]float64 `json:"extra"`
}

// Machine describes where the bench ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"goVersion"`
	Postgres  string `json:"postgres"`
	Redis     string `json:"redis"`
	// LoadBefore and LoadAfter are the 1-minute load averages when the run started and ended:
	// other work on the machine shifts the absolute figures (the ratios less so).
	LoadBefore float64 `json:"loadBefore"`
	LoadAfter  float64 `json:"loadAfter"`
	// Autovacuum is the server's setting; without it the bench does autovacuum's work before
	// each round.
	Autovacuum bool `json:"autovacuum"`
}

// Failed reports whether a goal was missed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == "fail" {
			return true
		}
	}
	return false
}

// ErrGoalMissed is returned by Main when at least one goal was missed.
var ErrGoalMissed = errors.New("bench: a performance goal was missed")

// Main is `agentry bench [--quick] [--json] [--only ID,...] [--rounds N] [--profile DIR]`.
func Main(ctx context.Context, args []string, databaseURL, redisURL string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := Options{DatabaseURL: databaseURL, RedisURL: redisURL, Progress: stderr}
	asJSON := fs.Bool("json", false, "print the results as JSON (progress still goes to stderr)")
	fs.BoolVar(&o.Quick, "quick", false, "one short round per measure (about a minute)")
	fs.IntVar(&o.Rounds, "rounds", 0, "rounds of baseline and agentry per measure (default 3, quick 1)")
	fs.IntVar(&o.Tenants, "tenants", 0, "tenants on the real path (default 8)")
	fs.Float64Var(&o.Window, "window", 0, "multiply every measuring window (default 1)")
	fs.BoolVar(&o.ScaleMeasures, "scale", false, "run the scale measures (SUBS-CHURN) instead of the performance ones")
	fs.IntVar(&o.Connections, "connections", 0, "SUBS-CHURN: WebSockets opened and closed (default 100000, quick 10000)")
	only := fs.String("only", "", "comma-separated measures to run (Q-LAT,E2E-TPUT,TTFT-ADD,TOK-TPUT,GQL-TPUT,FANOUT,BUDGET,COUNTERS,HISTORY; with --scale SUBS-CHURN)")
	fs.StringVar(&o.ProfileDir, "profile", "", "write a CPU profile of each measure's last agentry segment to this directory")
	fs.BoolVar(&o.LogStatements, "log-statements", false, "make Postgres log every statement on the bench database (diagnostics)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	rep, err := Run(ctx, o)
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(rep); jerr != nil {
				return jerr
			}
			PrintTable(stderr, rep) // for the person watching
		} else {
			PrintTable(stdout, rep)
		}
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return ErrGoalMissed
	}
	return nil
}

// Run runs the bench.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{Quick: o.Quick, Rounds: o.Rounds, Started: time.Now(), Extra: map[string]float64{}}
	progress(o.Progress, "setting up: fresh database, migrations, agentry, fake LLM, %d tenants", o.Tenants)
	e, err := setUp(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		progress(o.Progress, "tearing down (dropping %s)", e.dbName)
		e.tearDown()
	}()
	rep.Machine = machine(ctx, e)
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	type measure struct {
		id  string
		run func(context.Context, *env, *Report) error
	}
	measures := []measure{
		{"GQL-TPUT", measureGQL},
		{"Q-LAT", measureQLat},
		{"E2E-TPUT", measureE2E},
		{"BUDGET", measureBudget},
		{"COUNTERS", measureCounters},
		{"TTFT-ADD", measureTTFT},
		{"TOK-TPUT", measureTokens},
		{"FANOUT", measureFanout},
		{"HISTORY", measureHistory},
	}
	if o.ScaleMeasures {
		measures = []measure{{"SUBS-CHURN", measureChurn}}
	}
	for _, m := range measures {
		if !o.runs(m.id) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		start := time.Now()
		progress(o.Progress, "%s ...", m.id)
		if err := m.run(ctx, e, rep); err != nil {
			return rep, fmt.Errorf("%s: %w", m.id, err)
		}
		progress(o.Progress, "%s done in %s", m.id, time.Since(start).Round(100*time.Millisecond))
	}
	rep.Duration = time.Since(rep.Started)
	rep.Machine.LoadAfter = loadAverage()
	e.logs.report(o.Progress)
	return rep, nil
}

func progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// profile captures a CPU profile of fn into the profile directory (when set), and the
// allocation profile before and after it (name.allocs0.pprof, name.allocs.pprof: read the
// segment's allocations with `go tool pprof -base name.allocs0.pprof name.allocs.pprof`).
func (e *env) profile(name string, last bool, fn func()) {
	if e.o.ProfileDir == "" || !last {
		fn()
		return
	}
	path := func(suffix string) string { return filepath.Join(e.o.ProfileDir, name+suffix) }
	writeAllocs := func(suffix string) {
		runtime.GC() // the profile holds what the last collection saw (as go test -memprofile does)
		if f, err := os.Create(path(suffix)); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			_ = f.Close()
		}
	}
	f, err := os.Create(path(".pprof"))
	if err != nil {
		fn()
		return
	}
	defer f.Close()
	writeAllocs(".allocs0.pprof")
	if err := pprof.StartCPUProfile(f); err != nil {
		fn()
		return
	}
	fn()
	pprof.StopCPUProfile()
	writeAllocs(".allocs.pprof")
}

// alternate runs rounds of a and b in alternating order (AB, BA, AB...), after a warm-up of
// each; last tells the round functions whether they run the final round.
func (e *env) alternate(ctx context.Context, name string, warm func(ctx context.Context) error, a, b func(ctx context.Context, round int, last bool) error) error {
	if warm != nil {
		if err := warm(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	for r := 0; r < e.o.Rounds; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.maintain(ctx); err != nil {
			return err
		}
		last := r == e.o.Rounds-1
		first, second := a, b
		if r%2 == 1 {
			first, second = b, a
		}
		progress(e.o.Progress, "%s round %d/%d", name, r+1, e.o.Rounds)
		if err := first(ctx, r, last); err != nil {
			return err
		}
		if err := second(ctx, r, last); err != nil {
			return err
		}
	}
	return nil
}

// PrintTable writes the results, one line per check.
func PrintTable(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "agentry bench (%s, %d rounds) on %d CPUs (%s), %s, Postgres %s, Redis %s, took %s; load average %.2f before, %.2f after\n\n",
		map[bool]string{true: "quick", false: "full"}[rep.Quick], rep.Rounds, m.CPUs, m.CPUModel, m.GoVersion, m.Postgres, m.Redis,
		rep.Duration.Round(time.Second), m.LoadBefore, m.LoadAfter)
	if !m.Autovacuum {
		fmt.Fprintln(w, "Postgres runs without autovacuum: before each round the bench vacuumed and analyzed the tables autovacuum would have.")
	}
	fmt.Fprintf(w, "%-26s %16s %16s %9s  %-34s %s\n", "measure", "baseline", "agentry", "ratio", "goal", "result")
	for _, c := range rep.Checks {
		status := strings.ToUpper(c.Status)
		if c.Note != "" {
			status += "  (" + c.Note + ")"
		}
		fmt.Fprintf(w, "%-26s %16s %16s %9s  %-34s %s\n", c.Name, figure(c.Baseline, c.Unit), figure(c.Agentry, c.Unit), ratio(c.Ratio), c.Goal, status)
	}
	if len(rep.Extra) > 0 {
		fmt.Fprintln(w)
		keys := make([]string, 0, len(rep.Extra))
		for k := range rep.Extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-44s %s\n", k, trimFloat(rep.Extra[k]))
		}
	}
}

func figure(f float64, unit string) string {
	if math.IsNaN(f) {
		return "-"
	}
	return trimFloat(f) + " " + unit
}

func trimFloat(f float64) string {
	switch a := math.Abs(f); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", f)
	case a >= 100:
		return fmt.Sprintf("%.1f", f)
	case a >= 10:
		return fmt.Sprintf("%.2f", f)
	default:
		return fmt.Sprintf("%.3g", f)
	}
}

func ratio(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3fx", f)
}

// machine describes the host and the servers.
func machine(ctx context.Context, e *env) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(), LoadBefore: loadAverage()}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	_ = e.owner.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
	m.Autovacuum = !e.vacuum
	if info, err := e.rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.Redis = v
			}
		}
	}
	return m
}

// loadAverage is the machine's 1-minute load average (0 when unknown).
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	return f
}

// pass returns "pass" or "fail".
func pass(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}
