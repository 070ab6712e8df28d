package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/server"
)

// errorNote marks a side that lost samples; more than 1% fails the check.
func errorNote(base, ours *samples) (string, bool) {
	be, oe := base.errors.Load(), ours.errors.Load()
	if be == 0 && oe == 0 {
		return "", true
	}
	bad := float64(oe) > 0.01*float64(ours.count()+int(oe)) || float64(be) > 0.01*float64(base.count()+int(be))
	return fmt.Sprintf("errors: baseline %d, agentry %d", be, oe), !bad
}

// ---------------------------------------------------------------- Q-LAT

// measureQLat: sendMessage sent -> executor entered (the run's started_at, stamped by the
// transaction that acquires it) at 50 turns/s, against bare River Insert -> Work.
func measureQLat(ctx context.Context, e *env, rep *Report) error {
	const rate = 50.0
	win := e.o.window(4*time.Second, 2*time.Second)
	convs, err := e.conversations(ctx, 128, "bench-t20")
	if err != nil {
		return err
	}
	br, err := startBareRiver(ctx, e)
	if err != nil {
		return err
	}
	defer br.stop()
	var next atomic.Int64
	baseline := func(ctx context.Context, dur time.Duration, into *samples) error {
		return br.pickup(ctx, rate, dur, into)
	}
	agentry := func(ctx context.Context, dur time.Duration, into *samples) error {
		var mu sync.Mutex
		sent := map[uuid.UUID]time.Time{}
		openLoop(ctx, rate, dur, 5*time.Second, func(ctx context.Context, at time.Time) {
			c := convs[next.Add(1)%int64(len(convs))]
			runID, err := e.gql.sendMessage(ctx, c.s, c.id, "Hello, bench.")
			if err != nil {
				into.errors.Add(1)
				return
			}
			id, err := decodeID(runID)
			if err != nil {
				into.errors.Add(1)
				return
			}
			mu.Lock()
			sent[id] = at
			mu.Unlock()
		})
		ids := make([]uuid.UUID, 0, len(sent))
		for id := range sent {
			ids = append(ids, id)
		}
		started := map[uuid.UUID]time.Time{}
		deadline := time.Now().Add(5 * time.Second)
		for len(started) < len(ids) && time.Now().Before(deadline) {
			rows, err := e.owner.Query(ctx, "SELECT id, started_at FROM runs WHERE id = ANY($1) AND started_at IS NOT NULL", ids)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id uuid.UUID
				var at time.Time
				if err := rows.Scan(&id, &at); err != nil {
					rows.Close()
					return err
				}
				started[id] = at
			}
			rows.Close()
			if len(started) < len(ids) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		for id, at := range sent {
			if s, ok := started[id]; ok {
				into.add(s.Sub(at))
			} else {
				into.errors.Add(1)
			}
		}
		return nil
	}
	base, ours := &samples{}, &samples{}
	warm := func(ctx context.Context) error {
		d := e.o.window(time.Second, 500*time.Millisecond)
		if err := baseline(ctx, d, &samples{}); err != nil {
			return err
		}
		return agentry(ctx, d, &samples{})
	}
	err = e.alternate(ctx, "Q-LAT", warm,
		func(ctx context.Context, _ int, _ bool) error { return baseline(ctx, win, base) },
		func(ctx context.Context, _ int, last bool) error {
			var err error
			e.profile("q-lat", last, func() { err = agentry(ctx, win, ours) })
			return err
		})
	if err != nil {
		return err
	}
	note, ok := errorNote(base, ours)
	b50, o50, b99, o99 := base.pct(50), ours.pct(50), base.pct(99), ours.pct(99)
	rep.Checks = append(rep.Checks,
		Check{Measure: "Q-LAT", Name: "Q-LAT p50 @50/s", Unit: "ms", Baseline: b50, Agentry: o50, Ratio: o50 / b50,
			Goal: "<= baseline + 2 ms", Status: pass(ok && o50 <= b50+2), Note: note},
		Check{Measure: "Q-LAT", Name: "Q-LAT p99 @50/s", Unit: "ms", Baseline: b99, Agentry: o99, Ratio: o99 / b99,
			Goal: "<= 1.5x baseline", Status: pass(ok && o99 <= 1.5*b99), Note: note},
	)
	rep.Extra["Q-LAT samples baseline"] = float64(base.count())
	rep.Extra["Q-LAT samples agentry"] = float64(ours.count())
	return nil
}

// ---------------------------------------------------------------- E2E-TPUT

// e2eRound runs one closed-loop round of chat turns on fresh conversations (so histories stay
// short) and returns turns completed, the window, and failures.
func (e *env) e2eRound(ctx context.Context, sessions []session, clients int, win time.Duration, model string) (int64, time.Duration, int64, error) {
	const perClient = 4
	convs, err := e.conversationsOf(ctx, sessions, clients*perClient, model)
	if err != nil {
		return 0, 0, 0, err
	}
	f, err := e.openFleet(ctx, convs)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.close()
	k := make([]int, clients)
	n, w, failed := closedLoop(ctx, clients, win, 15*time.Second, func(ctx context.Context, worker int) error {
		c := convs[worker*perClient+k[worker]%perClient]
		k[worker]++
		_, err := e.turn(ctx, f, c, "Hello, bench.")
		return err
	})
	if bd, err := e.breakdown(ctx, f); err == nil {
		e.lastBreakdown = bd
	}
	return n, w, failed, nil
}

// riverRound runs one closed-loop round of no-op jobs: each client inserts a job and waits until
// it was worked.
func riverRound(ctx context.Context, br *bareRiver, clients int, win time.Duration) (int64, time.Duration, int64) {
	waiters := br.record(nil, clients)
	defer br.record(nil, 0)
	return closedLoop(ctx, clients, win, 5*time.Second, func(ctx context.Context, w int) error {
		if err := br.insert(ctx, noopArgs{Waiter: w}); err != nil {
			return err
		}
		select {
		case <-waiters[w]:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// measureE2E: chat turns per second end to end against bare River no-op jobs per second.
func measureE2E(ctx context.Context, e *env, rep *Report) error {
	win := max(e.o.window(5*time.Second, 1500*time.Millisecond), e.o.floor(time.Second))
	br, err := startBareRiver(ctx, e)
	if err != nil {
		return err
	}
	defer br.stop()
	var base, ours rate
	warm := func(ctx context.Context) error {
		riverRound(ctx, br, e.o.Clients, e.o.window(time.Second, 500*time.Millisecond))
		_, _, _, err := e.e2eRound(ctx, e.sessions, e.o.Clients, e.o.window(time.Second, 500*time.Millisecond), "bench-t20")
		return err
	}
	err = e.alternate(ctx, "E2E-TPUT", warm,
		func(ctx context.Context, _ int, _ bool) error {
			base.add(riverRound(ctx, br, e.o.Clients, win))
			return nil
		},
		func(ctx context.Context, _ int, last bool) error {
			var err error
			e.profile("e2e-tput", last, func() {
				var n, f int64
				var w time.Duration
				n, w, f, err = e.e2eRound(ctx, e.sessions, e.o.Clients, win, "bench-t20")
				ours.add(n, w, f)
			})
			return err
		})
	if err == nil && e.o.Window >= 1 {
		// Where the CPU goes (independent of what else the machine runs): a closed-loop
		// round at lower concurrency, CPU of this process and of the database's backends.
		before := e.cpu(ctx)
		var n int64
		n, _, _, err = e.e2eRound(ctx, e.sessions, 16, win, "bench-t20")
		after := e.cpu(ctx)
		if before.ok && after.ok && n > 0 {
			rep.Extra["E2E-TPUT CPU ms per turn: agentry process (incl. clients, fake LLM)"] = float64(after.self-before.self) / float64(time.Millisecond) / float64(n)
			rep.Extra["E2E-TPUT CPU ms per turn: Postgres backends"] = float64(after.postgres-before.postgres) / float64(time.Millisecond) / float64(n)
		}
	}
	if err != nil {
		return err
	}
	b, o := base.perSecond(), ours.perSecond()
	note := ""
	if base.failed+ours.failed > 0 {
		note = fmt.Sprintf("failed: baseline %d, agentry %d", base.failed, ours.failed)
	}
	r := o / b
	goal := "stretch 0.10x met"
	if r < 0.10 {
		goal = "stretch 0.10x missed"
	}
	if note == "" {
		note = goal
	} else {
		note += "; " + goal
	}
	for k, v := range e.lastBreakdown {
		rep.Extra["E2E-TPUT ms per turn: "+k] = v
	}
	rep.Checks = append(rep.Checks, Check{Measure: "E2E-TPUT", Name: "E2E-TPUT", Unit: "/s", Baseline: b, Agentry: o, Ratio: r,
		Goal: ">= 0.05x baseline", Status: pass(r >= 0.05 && ours.failed*100 <= ours.n), Note: note})
	return nil
}

// ---------------------------------------------------------------- BUDGET

// measureBudget: E2E-TPUT on tenants with budgets (every call reserves, then settles) against
// the same on tenants without any (nothing is checked), and the budget rows written per LLM
// call.
func measureBudget(ctx context.Context, e *env, rep *Report) error {
	win := max(e.o.window(5*time.Second, 1500*time.Millisecond), e.o.floor(time.Second))
	var off, on rate
	var budgetWrites, reservationWrites, calls int64
	// What enforcement costs per turn, side by side: Postgres backends' CPU and WAL written.
	var cost [2]struct{ turns, pgCPU, wal int64 }
	round := func(enforce bool) func(ctx context.Context, _ int, last bool) error {
		return func(ctx context.Context, _ int, last bool) error {
			sessions, side := e.plain, "off"
			if enforce {
				sessions, side = e.budgeted, "on"
			}
			var before [3]int64
			if enforce {
				var err error
				if before, err = e.budgetWrites(ctx); err != nil {
					return err
				}
			}
			cpu0 := e.cpu(ctx)
			wal0, err := e.walBytes(ctx)
			if err != nil {
				return err
			}
			var n, f int64
			var w time.Duration
			e.profile("budget-"+side, last, func() { n, w, f, err = e.e2eRound(ctx, sessions, e.o.Clients, win, "bench-t20") })
			if err != nil {
				return err
			}
			wal1, err := e.walBytes(ctx)
			if err != nil {
				return err
			}
			c := &cost[0]
			if enforce {
				c = &cost[1]
			}
			cpu1 := e.cpu(ctx)
			pgCPU := cpu1.postgres - cpu0.postgres
			c.turns += n
			c.pgCPU += int64(pgCPU)
			perTurn := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(max(n, 1)) }
			progress(e.o.Progress, "BUDGET %s: %.1f turns/s; CPU per turn: Postgres backends %.2f ms, this process %.2f ms", side,
				float64(n)/w.Seconds(), perTurn(pgCPU), perTurn(cpu1.self-cpu0.self))
			c.wal += wal1 - wal0
			if !enforce {
				off.add(n, w, f)
				return nil
			}
			on.add(n, w, f)
			after, err := e.budgetWrites(ctx)
			if err != nil {
				return err
			}
			budgetWrites += after[0] - before[0]
			reservationWrites += after[1] - before[1]
			calls += after[2] - before[2]
			return nil
		}
	}
	// An even number of rounds, at least two (off-on, on-off, ...): the two sides differ by
	// little, and the database grows with every round, so each side takes the earlier place as
	// often as the later one (with three rounds, the budgeted side would run later on average
	// and meet a larger database).
	rounds := e.o.Rounds
	e.o.Rounds = max(rounds+rounds%2, 2)
	err := e.alternate(ctx, "BUDGET", nil, round(false), round(true))
	e.o.Rounds = rounds
	if err != nil {
		return err
	}
	b, o := off.perSecond(), on.perSecond()
	// Every LLM call stores one usage record: their count is the calls made, including those
	// of turns still running when a window closed.
	perCall := float64(budgetWrites) / float64(max(calls, 1))
	rep.Extra["BUDGET reservation rows written per LLM call"] = float64(reservationWrites) / float64(max(calls, 1))
	for i, side := range []string{"off", "on"} {
		t := float64(max(cost[i].turns, 1))
		rep.Extra["BUDGET Postgres CPU ms per turn, "+side] = float64(cost[i].pgCPU) / float64(time.Millisecond) / t
		rep.Extra["BUDGET WAL bytes per turn, "+side] = float64(cost[i].wal) / t
	}
	note := fmt.Sprintf("%.2f budget row writes per LLM call", perCall)
	if off.failed+on.failed > 0 {
		note += fmt.Sprintf("; failed: off %d, on %d", off.failed, on.failed)
	}
	rep.Checks = append(rep.Checks, Check{Measure: "BUDGET", Name: "BUDGET on vs off", Unit: "/s", Baseline: b, Agentry: o, Ratio: o / b,
		Goal: ">= 0.90x; <= 2 writes/LLM call", Status: pass(o/b >= 0.90 && perCall <= 2), Note: note})
	return nil
}

// ---------------------------------------------------------------- COUNTERS

// measureCounters: Postgres commits (pg_stat_database.xact_commit of the bench database) and
// Redis PUBLISH calls (INFO commandstats) per chat turn of 20 tokens.
func measureCounters(ctx context.Context, e *env, rep *Report) error {
	const clients, tokens = 16, 20
	turns := 400
	if e.o.Quick {
		turns = 150
	}
	turns = max(int(float64(turns)*min(e.o.Window, 1)), 20)
	convs, err := e.conversations(ctx, clients*4, fmt.Sprintf("bench-t%d", tokens))
	if err != nil {
		return err
	}
	f, err := e.openFleet(ctx, convs)
	if err != nil {
		return err
	}
	defer f.close()
	// warm-up: a turn per conversation, so every path has run once
	var wg sync.WaitGroup
	for _, c := range convs[:clients] {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = e.turn(ctx, f, c, "warm up") }()
	}
	wg.Wait()
	// What the process commits with no turn running (River's polls and maintenance, the
	// periodic jobs): subtracted over the turns' interval, so the figure is a turn's own cost.
	idle, err := e.counters(ctx)
	if err != nil {
		return err
	}
	time.Sleep(e.o.floor(2 * time.Second))
	before, err := e.counters(ctx)
	if err != nil {
		return err
	}
	background := float64(before.commits-idle.commits) / before.at.Sub(idle.at).Seconds()
	var left atomic.Int64
	left.Store(int64(turns))
	var failed atomic.Int64
	k := make([]int, clients)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				c := convs[w*4+k[w]%4]
				k[w]++
				tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				if _, err := e.turn(tctx, f, c, "Hello, bench."); err != nil {
					failed.Add(1)
				}
				cancel()
			}
		}()
	}
	e.profile("counters", true, func() { wg.Wait() })
	after, err := e.counters(ctx)
	if err != nil {
		return err
	}
	n := float64(turns)
	gross := float64(after.commits-before.commits) / n
	commits := gross - background*after.at.Sub(before.at).Seconds()/n
	info := float64(after.publishInfo-before.publishInfo) / n
	own := float64(after.publishOwn-before.publishOwn) / n
	publishes, note := info, "INFO commandstats"
	if info > own+0.05 {
		// Someone else published on this Redis meanwhile: this process's own count is exact.
		publishes, note = own, fmt.Sprintf("other clients published on this Redis meanwhile (INFO said %.2f/turn); agentry's own count", info)
	}
	if failed.Load() > 0 {
		note += fmt.Sprintf("; %d turns failed", failed.Load())
	}
	limit := 4 + float64(tokens)/16
	rep.Checks = append(rep.Checks,
		Check{Measure: "COUNTERS", Name: "COUNTERS pg commits/turn", Unit: "", Baseline: math.NaN(), Agentry: commits, Ratio: math.NaN(),
			Goal: "<= 6", Status: pass(commits <= 6 && failed.Load() == 0),
			Note: fmt.Sprintf("%.2f with the background's %.1f commits/s", gross, background)},
		Check{Measure: "COUNTERS", Name: "COUNTERS PUBLISH/turn", Unit: "", Baseline: math.NaN(), Agentry: publishes, Ratio: math.NaN(),
			Goal: fmt.Sprintf("<= 4 + %d/16 = %.2f", tokens, limit), Status: pass(publishes <= limit && failed.Load() == 0), Note: note},
	)
	rep.Extra["COUNTERS redis commands/turn (agentry's client)"] = float64(after.commandsOwn-before.commandsOwn) / n
	rep.Extra["COUNTERS turns measured"] = n
	return nil
}

// ---------------------------------------------------------------- TTFT-ADD

// measureTTFT: time to first token at a WebSocket subscriber (from the intended send of
// sendMessage) against a direct streaming client of the fake LLM, at 1 turn at a time (zero
// latency) and at 32 concurrent turns (realistic pacing: 300 ms to the first token, 20 ms per
// token). A chat turn is a River job, so at 1 turn at a time the time it adds is compared with
// bare River's pickup (Insert -> Work, as Q-LAT's baseline) measured at the same rate, in the
// baseline's rounds: added p50 at most that p50 + 4 ms.
func measureTTFT(ctx context.Context, e *env, rep *Report) error {
	direct := e.newDirectClient()
	type level struct {
		name      string
		model     string
		rate      float64
		win       time.Duration
		convs     int
		p50, p99  float64 // goals on the added time (ms): p50 above bare River's pickup p50; NaN: none
		base, our *samples
		pickup    *samples // bare River's pickup at the same rate (nil: not measured)
	}
	turn := e.llm.FirstToken + 19*e.llm.PerToken
	levels := []*level{
		{name: "@1", model: "bench-t20", rate: 20, win: e.o.window(5*time.Second, 2*time.Second), convs: 32, p50: 4, p99: 25, pickup: &samples{}},
		{name: "@32", model: "bench-t20-r", rate: 32 / turn.Seconds(), win: e.o.window(6*time.Second, 2*time.Second), convs: 256, p50: math.NaN(), p99: 50},
	}
	br, err := startBareRiver(ctx, e)
	if err != nil {
		return err
	}
	defer br.stop()
	for _, l := range levels {
		l.base, l.our = &samples{}, &samples{}
		convs, err := e.conversations(ctx, l.convs, l.model)
		if err != nil {
			return err
		}
		f, err := e.openFleet(ctx, convs)
		if err != nil {
			return err
		}
		var next atomic.Int64
		baseline := func(ctx context.Context, dur time.Duration, into *samples) error {
			openLoop(ctx, l.rate, dur, 5*time.Second, func(ctx context.Context, at time.Time) {
				first, err := direct.stream(ctx, l.model, nil)
				if err != nil || first.IsZero() {
					into.errors.Add(1)
					return
				}
				into.add(first.Sub(at))
			})
			if l.pickup != nil && into == l.base {
				return br.pickup(ctx, l.rate, dur, l.pickup)
			}
			return nil
		}
		agentry := func(ctx context.Context, dur time.Duration, into *samples) error {
			openLoop(ctx, l.rate, dur, 10*time.Second, func(ctx context.Context, at time.Time) {
				c := convs[next.Add(1)%int64(len(convs))]
				r, err := e.turn(ctx, f, c, "Hello, bench.")
				if err != nil || r.first.IsZero() {
					into.errors.Add(1)
					return
				}
				into.add(r.first.Sub(at))
			})
			return nil
		}
		warm := func(ctx context.Context) error {
			d := e.o.window(time.Second, 500*time.Millisecond)
			if l.model != "bench-t20" {
				d = 0 // the realistic pace needs no warming, and costs seconds
			}
			if d == 0 {
				return nil
			}
			if err := baseline(ctx, d, &samples{}); err != nil {
				return err
			}
			return agentry(ctx, d, &samples{})
		}
		err = e.alternate(ctx, "TTFT-ADD "+l.name, warm,
			func(ctx context.Context, _ int, _ bool) error { return baseline(ctx, l.win, l.base) },
			func(ctx context.Context, _ int, last bool) error {
				var err error
				e.profile("ttft"+l.name[1:], last, func() { err = agentry(ctx, l.win, l.our) })
				return err
			})
		if bd, berr := e.breakdown(ctx, f); berr == nil {
			for k, v := range bd {
				rep.Extra["TTFT-ADD "+l.name+" ms per turn: "+k] = v
			}
		}
		f.close()
		if err != nil {
			return err
		}
		note, ok := errorNote(l.base, l.our)
		if !math.IsNaN(l.p50) {
			b, o, pick := l.base.pct(50), l.our.pct(50), l.pickup.pct(50)
			rep.Checks = append(rep.Checks, Check{Measure: "TTFT-ADD", Name: "TTFT-ADD p50 " + l.name, Unit: "ms", Baseline: b, Agentry: o, Ratio: o / b,
				Goal: fmt.Sprintf("added <= pickup + %g ms", l.p50), Status: pass(ok && o-b <= pick+l.p50),
				Note: joinNote(fmt.Sprintf("added %.2f ms, bare River pickup p50 %.2f ms", o-b, pick), note)})
			rep.Extra["TTFT-ADD "+l.name+" bare River pickup p50 ms"] = pick
			rep.Extra["TTFT-ADD "+l.name+" bare River pickup p99 ms"] = l.pickup.pct(99)
		}
		b, o := l.base.pct(99), l.our.pct(99)
		rep.Checks = append(rep.Checks, Check{Measure: "TTFT-ADD", Name: "TTFT-ADD p99 " + l.name, Unit: "ms", Baseline: b, Agentry: o, Ratio: o / b,
			Goal: fmt.Sprintf("added <= %g ms", l.p99), Status: pass(ok && o-b <= l.p99), Note: joinNote(fmt.Sprintf("added %.2f ms", o-b), note)})
		rep.Extra["TTFT-ADD "+l.name+" arrival rate /s"] = l.rate
		rep.Extra["TTFT-ADD "+l.name+" samples agentry"] = float64(l.our.count())
	}
	return nil
}

func joinNote(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

// ---------------------------------------------------------------- TOK-TPUT

// measureTokens: token deltas delivered per second to WebSocket subscribers with 32 concurrent
// turns of 500 tokens, against 32 concurrent direct streams.
func measureTokens(ctx context.Context, e *env, rep *Report) error {
	const clients, model = 32, "bench-t500"
	win := e.o.window(4*time.Second, 2*time.Second)
	direct := e.newDirectClient()
	var base, ours rate
	baseline := func(ctx context.Context, dur time.Duration) (int64, time.Duration) {
		var tokens atomic.Int64
		from := time.Now()
		to := from.Add(dur)
		closedLoop(ctx, clients, dur, 5*time.Second, func(ctx context.Context, _ int) error {
			_, err := direct.stream(ctx, model, func(n int, at time.Time) {
				if at.Before(to) {
					tokens.Add(int64(n))
				}
			})
			return err
		})
		return tokens.Load(), dur
	}
	agentry := func(ctx context.Context, dur time.Duration) (int64, time.Duration, error) {
		const perClient = 4
		convs, err := e.conversations(ctx, clients*perClient, model)
		if err != nil {
			return 0, 0, err
		}
		f, err := e.openFleet(ctx, convs)
		if err != nil {
			return 0, 0, err
		}
		defer f.close()
		k := make([]int, clients)
		now := time.Now()
		f.tr.countTokensBetween(now, now.Add(dur))
		closedLoop(ctx, clients, dur, 15*time.Second, func(ctx context.Context, w int) error {
			c := convs[w*perClient+k[w]%perClient]
			k[w]++
			_, err := e.turn(ctx, f, c, "Hello, bench.")
			return err
		})
		return f.tr.tokens.Load(), dur, nil
	}
	warm := func(ctx context.Context) error {
		d := e.o.window(time.Second, 500*time.Millisecond)
		baseline(ctx, d)
		_, _, err := agentry(ctx, d)
		return err
	}
	err := e.alternate(ctx, "TOK-TPUT", warm,
		func(ctx context.Context, _ int, _ bool) error {
			n, w := baseline(ctx, win)
			base.add(n, w, 0)
			return nil
		},
		func(ctx context.Context, _ int, last bool) error {
			var err error
			e.profile("tok-tput", last, func() {
				var n int64
				var w time.Duration
				n, w, err = agentry(ctx, win)
				ours.add(n, w, 0)
			})
			return err
		})
	if err != nil {
		return err
	}
	b, o := base.perSecond(), ours.perSecond()
	rep.Checks = append(rep.Checks, Check{Measure: "TOK-TPUT", Name: "TOK-TPUT 32 turns", Unit: "tok/s", Baseline: b, Agentry: o, Ratio: o / b,
		Goal: ">= 0.20x baseline", Status: pass(o/b >= 0.20)})
	return nil
}

// ---------------------------------------------------------------- GQL-TPUT

const viewerQuery = `{"query":"{ viewer { user { id } } }"}`

// bareViewer answers the viewer query as a bare JSON handler would: decode the request, read the
// actor the middleware put in the context, encode the answer.
func bareViewer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"errors":[{"message":"bad request"}]}`, http.StatusBadRequest)
		return
	}
	a, ok := auth.ActorFrom(r.Context())
	if !ok {
		http.Error(w, `{"errors":[{"message":"unauthenticated"}]}`, http.StatusUnauthorized)
		return
	}
	type user struct {
		ID string `json:"id"`
	}
	type viewer struct {
		User user `json:"user"`
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"viewer": viewer{User: user{
		ID: base64.RawURLEncoding.EncodeToString([]byte("User:" + a.UserID.String())),
	}}}})
}

// measureGQL: authenticated `{ viewer { user { id } } }` requests per second against a bare
// net/http JSON handler behind the same middleware and authentication (server.New).
func measureGQL(ctx context.Context, e *env, rep *Report) error {
	const clients = 32
	win := e.o.window(3*time.Second, 1500*time.Millisecond)
	cfg := e.app.Config
	bare := server.New(server.Options{Log: e.app.Log, Auth: e.app.Auth, GraphQL: http.HandlerFunc(bareViewer),
		Registry: prometheus.NewRegistry(), MaxBodyBytes: cfg.MaxBodyBytes, AllowedOrigins: cfg.AllowedOrigins})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: bare, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	bareURL := "http://" + ln.Addr().String() + "/graphql"
	token := e.sessions[0].token
	load := func(ctx context.Context, url string, dur time.Duration) (int64, time.Duration, int64) {
		hc := newHTTPClient(clients)
		defer hc.CloseIdleConnections()
		return closedLoop(ctx, clients, dur, 5*time.Second, func(ctx context.Context, _ int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(viewerQuery)))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				return err
			}
			if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"id":"`)) {
				return fmt.Errorf("HTTP %d: %.200s", res.StatusCode, body)
			}
			return nil
		})
	}
	var base, ours rate
	warm := func(ctx context.Context) error {
		d := e.o.window(time.Second, 500*time.Millisecond)
		load(ctx, bareURL, d)
		load(ctx, e.baseURL+"/graphql", d)
		return nil
	}
	err = e.alternate(ctx, "GQL-TPUT", warm,
		func(ctx context.Context, _ int, _ bool) error { base.add(load(ctx, bareURL, win)); return nil },
		func(ctx context.Context, _ int, last bool) error {
			e.profile("gql-tput", last, func() { ours.add(load(ctx, e.baseURL+"/graphql", win)) })
			return nil
		})
	if err != nil {
		return err
	}
	b, o := base.perSecond(), ours.perSecond()
	note := "stretch 0.70x met"
	if o/b < 0.70 {
		note = "stretch 0.70x missed"
	}
	if base.failed+ours.failed > 0 {
		note += fmt.Sprintf("; failed: baseline %d, agentry %d", base.failed, ours.failed)
	}
	rep.Checks = append(rep.Checks, Check{Measure: "GQL-TPUT", Name: "GQL-TPUT viewer", Unit: "req/s", Baseline: b, Agentry: o, Ratio: o / b,
		Goal: ">= 0.60x baseline", Status: pass(o/b >= 0.60 && ours.failed == 0), Note: note})
	return nil
}
