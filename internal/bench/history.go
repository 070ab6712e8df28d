package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// ---------------------------------------------------------------- HISTORY

// historyTurns is the length of HISTORY's long conversation; its first and last historyBucket
// turns are compared.
const (
	historyTurns  = 800
	historyBucket = 50
	// historyPast is how many earlier turns the long-lived tenant has (inserted in bulk).
	historyPast = 100_000
	// historyPerConversation is how many of those turns each of its conversations holds.
	historyPerConversation = 100
)

// historyMessage is the user's message in HISTORY's turns: about 100 tokens, so that the
// window fills within a few turns.
var historyMessage = strings.Repeat("Tell me more about the history of this conversation, please. ", 6)

// turnCost is what a run of turns cost: wall time and CPU of this process and of the bench
// database's Postgres backends, per turn (milliseconds).
type turnCost struct {
	turns                int
	wall, self, postgres float64
	failed               int
}

func (c *turnCost) add(o turnCost) {
	n := float64(c.turns + o.turns)
	if n == 0 {
		return
	}
	w := func(a, b float64) float64 { return (a*float64(c.turns) + b*float64(o.turns)) / n }
	c.wall, c.self, c.postgres = w(c.wall, o.wall), w(c.self, o.self), w(c.postgres, o.postgres)
	c.turns += o.turns
	c.failed += o.failed
}

// turns sends n turns to conversation c one after another (the next once the last one's
// terminal event arrived) and returns what they cost.
func (e *env) sequentialTurns(ctx context.Context, f *fleet, c conversation, n int) turnCost {
	cpu0 := e.cpu(ctx)
	start := time.Now()
	failed := 0
	for i := 0; i < n; i++ {
		if _, err := e.turn(ctx, f, c, historyMessage); err != nil {
			failed++
		}
	}
	wall := time.Since(start)
	cpu1 := e.cpu(ctx)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
	return turnCost{turns: n, wall: ms(wall), self: ms(cpu1.self - cpu0.self), postgres: ms(cpu1.postgres - cpu0.postgres), failed: failed}
}

// measureHistory: a turn costs the same late in a long conversation as early in it, and in a
// tenant with a long history as in a fresh one.
//
// LONG-CONV sends 800 turns one after another into one conversation (a message of about 100
// tokens, a 20-token reply) and compares turns 751-800 with turns 1-50: wall time per turn, CPU
// of this process and of the Postgres backends per turn. The model's context is set to the
// smallest window (contextwin.MinBudget tokens of history) so that the window fills within the
// first turns and the summariser runs every few turns on both sides: what grows with the
// conversation is agentry's own work, never the request.
//
// OLD-TENANT inserts 100,000 past turns (1,000 conversations of 100 turns: runs, messages,
// events, usage records and reservations, as a turn stores them) into one tenant with SQL,
// lets autovacuum's work happen, then alternates rounds of turns in a new conversation of that
// tenant and of a fresh tenant (both with budgets) and compares them the same way.
func measureHistory(ctx context.Context, e *env, rep *Report) error {
	turns, bucket, past := historyTurns, historyBucket, historyPast
	if e.o.Window < 1 { // the harness's own test
		turns, bucket, past = 60, 10, 2_000
	}
	s, err := e.freshTenants(ctx, 3)
	if err != nil {
		return err
	}
	long, old, fresh := s[0], s[1], s[2]

	// LONG-CONV
	const model = "bench-t20"
	ref := "openai:" + model
	e.app.Context.SetContextTokens(ref, 1) // the smallest window: MinBudget
	defer e.app.Context.SetContextTokens(ref, 0)
	convs, err := e.conversationsOf(ctx, []session{long, long}, 2, model)
	if err != nil {
		return err
	}
	f, err := e.openFleet(ctx, convs)
	if err != nil {
		return err
	}
	// Warm-up, in a conversation of its own: the process's first turns (connections, caches)
	// are not the conversation's.
	e.sequentialTurns(ctx, f, convs[1], bucket/2)
	var first, last turnCost
	done := 0
	for done < turns {
		n := bucket
		switch {
		case done == 0:
		case done < turns-bucket:
			n = turns - bucket - done
		}
		var c turnCost
		measured := done == 0 || done+n == turns
		var before map[string]int64
		if measured {
			if before, err = e.rowsRead(ctx); err != nil {
				f.close()
				return err
			}
		}
		name := map[bool]string{true: "history-long-first", false: "history-long-last"}[done == 0]
		e.profile(name, measured, func() { c = e.sequentialTurns(ctx, f, convs[0], n) })
		if measured {
			after, err := e.rowsRead(ctx)
			if err != nil {
				f.close()
				return err
			}
			var total int64
			var parts []string
			for t, v := range after {
				total += v - before[t]
				if per := float64(v-before[t]) / float64(n); per >= 1 {
					parts = append(parts, fmt.Sprintf("%s %.1f", t, per))
				}
			}
			slices.Sort(parts)
			which := map[bool]string{true: "1-" + fmt.Sprint(n), false: fmt.Sprintf("%d-%d", done+1, done+n)}[done == 0]
			rep.Extra["HISTORY rows read per turn, long conversation turns "+which] = float64(total) / float64(n)
			progress(e.o.Progress, "HISTORY long conversation turns %s: %.1f rows read per turn (%s)", which,
				float64(total)/float64(n), strings.Join(parts, ", "))
		}
		switch {
		case done == 0:
			first = c
		case done+n == turns:
			last = c
		}
		done += n
		progress(e.o.Progress, "HISTORY long conversation: %d/%d turns (%.1f ms per turn, CPU %.2f + %.2f ms)", done, turns, c.wall, c.self, c.postgres)
		if done < turns {
			if err := e.maintain(ctx); err != nil {
				f.close()
				return err
			}
		}
	}
	f.close()
	e.app.Context.SetContextTokens(ref, 0)
	var summaries int64
	if id, err := decodeID(convs[0].id); err == nil {
		_ = e.owner.QueryRow(ctx, `SELECT count(*) FROM run_events v JOIN runs r ON r.tenant_id = v.tenant_id AND r.id = v.run_id
			WHERE v.type = 'context.window.applied' AND r.tenant_id = $1 AND r.conversation_id = $2`, long.tenantID, id).Scan(&summaries)
	}
	rep.Extra["HISTORY long conversation: windows summarised"] = float64(summaries)
	e.historyChecks(rep, "turns 751-800 vs 1-50", fmt.Sprintf("turns %d-%d vs 1-%d", turns-bucket+1, turns, bucket), first, last)

	// OLD-TENANT
	start := time.Now()
	if err := e.insertHistory(ctx, old, past); err != nil {
		return fmt.Errorf("insert the long-lived tenant's history: %w", err)
	}
	progress(e.o.Progress, "HISTORY: %d past turns inserted in %s", past, time.Since(start).Round(time.Millisecond))
	if err := e.settle(ctx); err != nil {
		return err
	}
	sides := []session{fresh, old}
	cs, err := e.conversationsOf(ctx, sides, 2, model)
	if err != nil {
		return err
	}
	if f, err = e.openFleet(ctx, cs); err != nil {
		return err
	}
	defer f.close()
	per := e.o.Rounds * 2 * bucket
	if e.o.Quick {
		per = 2 * bucket
	}
	per = max(per/e.o.Rounds, 5)
	var costs [2]turnCost
	var read [2]map[string]int64
	round := func(i int) func(ctx context.Context, r int, lastRound bool) error {
		return func(ctx context.Context, r int, lastRound bool) error {
			before, err := e.rowsRead(ctx)
			if err != nil {
				return err
			}
			var c turnCost
			e.profile([]string{"history-fresh", "history-old"}[i], lastRound, func() { c = e.sequentialTurns(ctx, f, cs[i], per) })
			costs[i].add(c)
			after, err := e.rowsRead(ctx)
			if err != nil {
				return err
			}
			if read[i] == nil {
				read[i] = map[string]int64{}
			}
			for t, n := range after {
				read[i][t] += n - before[t]
			}
			read[i][""] += int64(c.turns)
			progress(e.o.Progress, "HISTORY %s tenant: %.1f ms per turn, CPU %.2f + %.2f ms", []string{"fresh", "long-lived"}[i], c.wall, c.self, c.postgres)
			return nil
		}
	}
	warm := func(ctx context.Context) error {
		for i := range cs {
			e.sequentialTurns(ctx, f, cs[i], 5)
		}
		return nil
	}
	if err := e.alternate(ctx, "HISTORY tenants", warm, round(0), round(1)); err != nil {
		return err
	}
	e.historyChecks(rep, "100k-turn tenant vs fresh", fmt.Sprintf("tenant of %d past turns vs fresh", past), costs[0], costs[1])
	// Rows read per turn (pg_stat_user_tables: every backend of the bench database, River's
	// included), per side: a query that scans a tenant's history shows here, whatever the
	// machine's load.
	for i, side := range []string{"fresh", "long-lived"} {
		turns := float64(max(read[i][""], 1))
		total := int64(0)
		for t, n := range read[i] {
			if t == "" {
				continue
			}
			total += n
			if other := read[1-i][t]; i == 1 && float64(n)/turns > float64(other)/float64(max(read[0][""], 1))+5 {
				rep.Extra["HISTORY rows read per turn, long-lived tenant, "+t] = float64(n) / turns
			}
		}
		rep.Extra["HISTORY rows read per turn, "+side+" tenant"] = float64(total) / turns
		var parts []string
		for t, n := range read[i] {
			if t != "" && float64(n)/turns >= 1 {
				parts = append(parts, fmt.Sprintf("%s %.1f", t, float64(n)/turns))
			}
		}
		slices.Sort(parts)
		progress(e.o.Progress, "HISTORY rows read per turn, %s tenant: %s", side, strings.Join(parts, ", "))
	}
	return nil
}

// rowsRead is the rows read so far from each table of the bench database (heap tuples fetched
// by index scans and read by sequential scans), once every backend has reported them.
func (e *env) rowsRead(ctx context.Context) (map[string]int64, error) {
	e.flushStats(ctx)
	rows, err := e.owner.Query(ctx, `SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, err
		}
		out[t] = n
	}
	return out, rows.Err()
}

// historyChecks adds HISTORY's three checks of one comparison: wall time, this process's CPU and
// the Postgres backends' CPU per turn, each at most 1.2x.
func (e *env) historyChecks(rep *Report, name, note string, base, ours turnCost) {
	failed := base.failed + ours.failed
	for _, k := range []struct {
		what string
		b, o float64
	}{
		{"time/turn", base.wall, ours.wall},
		{"agentry CPU/turn", base.self, ours.self},
		{"Postgres CPU/turn", base.postgres, ours.postgres},
	} {
		r := k.o / k.b
		if k.b <= 0 {
			r = math.NaN()
		}
		n := note
		if failed > 0 {
			n += fmt.Sprintf("; %d turns failed", failed)
		}
		rep.Checks = append(rep.Checks, Check{Measure: "HISTORY", Name: "HISTORY " + name + " " + k.what, Unit: "ms",
			Baseline: k.b, Agentry: k.o, Ratio: r, Goal: "<= 1.2x", Status: pass(r <= 1.2 && failed == 0), Note: n})
	}
}

// freshTenants signs up n tenants of HISTORY's own, each with a budget like the others'.
func (e *env) freshTenants(ctx context.Context, n int) ([]session, error) {
	out := make([]session, n)
	for i := range out {
		var err error
		if out[i], err = e.gql.signUp(ctx, fmt.Sprintf("history%d@%s.example.com", i, strings.ReplaceAll(e.dbName, "_", "-"))); err != nil {
			return nil, err
		}
		if err := e.gql.setBudget(ctx, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// settle does what autovacuum does after a bulk load (vacuum and analyze what changed), even
// when the server runs it: HISTORY compares tenants, not the moment autovacuum comes by.
func (e *env) settle(ctx context.Context) error {
	for _, t := range []string{"conversations", "runs", "messages", "run_events", "usage_records", "reservations"} {
		if _, err := e.owner.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return fmt.Errorf("VACUUM (ANALYZE) %s: %w", t, err)
		}
	}
	return nil
}

// insertHistory gives session s's tenant n past chat turns, in conversations of
// historyPerConversation turns, as agentry stores a turn: a completed run with its job's
// events (queued, started, message, usage, completed), the user's message and the reply, a
// usage record and a settled reservation. Ids are uuid v7 in time order, as agentry makes them.
// It runs as the database's owner (row-level security does not apply).
func (e *env) insertHistory(ctx context.Context, s session, n int) error {
	conn, err := e.owner.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var project string
	if err := conn.QueryRow(ctx, `SELECT id::text FROM projects WHERE tenant_id = $1 AND is_default`, s.tenantID).Scan(&project); err != nil {
		return fmt.Errorf("default project: %w", err)
	}
	var budgets []string
	rows, err := conn.Query(ctx, `SELECT id::text FROM budgets WHERE tenant_id = $1`, s.tenantID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		budgets = append(budgets, id)
	}
	rows.Close()
	per := historyPerConversation
	// The past starts 30 days ago, a turn every few seconds: a uuid v7 of time ms and a seed.
	stmts := []string{
		`CREATE OR REPLACE FUNCTION pg_temp.v7(ms bigint, seed text) RETURNS uuid LANGUAGE sql IMMUTABLE AS
		 $$ SELECT (lpad(to_hex(ms), 12, '0') || '7' || substr(md5(seed), 1, 3) || '8' || substr(md5(seed), 4, 15))::uuid $$`,
		`CREATE TEMP TABLE history_turns ON COMMIT DROP AS
		 SELECT i, ((i - 1) / {PER}) + 1 AS conv, ((i - 1) % {PER}) + 1 AS seq,
		        (extract(epoch FROM now() - interval '30 days') * 1000)::bigint + i::bigint * 2000 AS ms
		 FROM generate_series(1, {N}) AS i`,
		`INSERT INTO conversations (tenant_id, id, project_id, user_id, title, model, agentic, message_count, run_count, created_at, updated_at)
		 SELECT '{T}', pg_temp.v7(min(ms), '{T}' || 'c' || conv), '{P}', '{U}', 'past ' || conv, 'openai:bench-t20', false,
		        2 * count(*), count(*), to_timestamp(min(ms) / 1000.0), to_timestamp(max(ms) / 1000.0)
		 FROM history_turns GROUP BY conv`,
		`INSERT INTO runs (tenant_id, id, user_id, kind, status, conversation_id, conversation_seq, trigger_message_id,
		                   attempt, turns, llm_calls, input_tokens, output_tokens, cost_micros, last_seq, termination_reason,
		                   created_at, started_at, finished_at)
		 SELECT '{T}', pg_temp.v7(ms, '{T}' || 'r' || i), '{U}', 'CHAT_TURN', 'COMPLETED',
		        pg_temp.v7(((extract(epoch FROM now() - interval '30 days') * 1000)::bigint + ((conv - 1) * {PER} + 1) * 2000), '{T}' || 'c' || conv),
		        seq, pg_temp.v7(ms, '{T}' || 'u' || i), 1, 1, 1, 400, 20, 10, 6, 'completed',
		        to_timestamp(ms / 1000.0), to_timestamp(ms / 1000.0), to_timestamp((ms + 50) / 1000.0)
		 FROM history_turns`,
		`INSERT INTO messages (tenant_id, id, conversation_id, run_id, run_seq, position, role, content, parts, token_estimate, llm_call_index, created_at)
		 SELECT '{T}', CASE k WHEN 1 THEN pg_temp.v7(h.ms, '{T}' || 'u' || h.i) ELSE pg_temp.v7(h.ms + 40, '{T}' || 'a' || h.i) END,
		        r.conversation_id, r.id, h.seq, 2 * (h.seq - 1) + k, CASE k WHEN 1 THEN 'USER' ELSE 'ASSISTANT' END, t.text,
		        jsonb_build_array(jsonb_build_object('type', 'text', 'text', t.text)), (octet_length(t.text) + 3) / 4,
		        CASE k WHEN 2 THEN 0 END, to_timestamp((h.ms + 40 * (k - 1)) / 1000.0)
		 FROM history_turns h
		 JOIN runs r ON r.tenant_id = '{T}' AND r.id = pg_temp.v7(h.ms, '{T}' || 'r' || h.i),
		      generate_series(1, 2) AS k,
		      LATERAL (SELECT CASE k WHEN 1 THEN 'Past question number ' || h.i || ', about something that mattered then.'
		                        ELSE ' alpha bravo charlie delta echo foxtrot golf hotel alpha bravo charlie delta echo foxtrot golf hotel alpha bravo charlie delta' END) AS t (text)`,
		`INSERT INTO run_events (tenant_id, run_id, seq, type, data, created_at)
		 SELECT '{T}', pg_temp.v7(h.ms, '{T}' || 'r' || h.i), ev.seq, ev.type, '{}'::jsonb, to_timestamp((h.ms + ev.seq * 8) / 1000.0)
		 FROM history_turns h,
		      (VALUES (1, 'task.queued'), (2, 'execution.started'), (3, 'task.started'), (4, 'message.completed'),
		              (5, 'usage.recorded'), (6, 'execution.completed')) AS ev (seq, type)`,
		`INSERT INTO usage_records (tenant_id, id, run_id, user_id, run_kind, call_index, provider, model, input_tokens, output_tokens, cost_micros, created_at)
		 SELECT '{T}', pg_temp.v7(h.ms + 45, '{T}' || 'ur' || h.i), pg_temp.v7(h.ms, '{T}' || 'r' || h.i), '{U}', 'CHAT_TURN', 0,
		        'openai', 'bench-t20', 400, 20, 10, to_timestamp((h.ms + 45) / 1000.0)
		 FROM history_turns h`,
		`INSERT INTO reservations (tenant_id, id, run_id, call_index, attempt, budget_ids, reserved_tokens, reserved_micros,
		                           actual_tokens, actual_micros, status, created_at, expires_at, finished_at)
		 SELECT '{T}', pg_temp.v7(h.ms + 10, '{T}' || 'rs' || h.i), pg_temp.v7(h.ms, '{T}' || 'r' || h.i), 0, 1, '{B}'::uuid[],
		        5000, 100, 420, 10, 'SETTLED', to_timestamp((h.ms + 10) / 1000.0), to_timestamp((h.ms + 10) / 1000.0 + 600),
		        to_timestamp((h.ms + 45) / 1000.0)
		 FROM history_turns h`,
	}
	repl := strings.NewReplacer("{T}", s.tenantID.String(), "{U}", s.userID.String(), "{P}", project,
		"{B}", "{"+strings.Join(budgets, ",")+"}", "{N}", fmt.Sprint(n), "{PER}", fmt.Sprint(per))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for i, q := range stmts {
		if _, err := tx.Exec(ctx, repl.Replace(q)); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	return tx.Commit(ctx)
}
